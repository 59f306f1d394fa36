"""The dev server: serves web/ on 127.0.0.1 only and takes result uploads from headless pages.

- GET/HEAD: files under web/ (the vendored Pyodide and wheels live in web/vendor/), with explicit
  MIME types (application/wasm matters: streaming compilation refuses anything else) and
  `Cache-Control: no-store`, so a rebuilt wheel is never served stale. A `Range: bytes=a-b` request gets
  206 with those bytes only (the page reads a model file a tensor at a time); a range past the end, 416.
- POST /api/results/<run>/<name>: the body is stored as <results>/<run>/<name>. Names are plain
  ([A-Za-z0-9._-], no leading dot); bodies are capped.
- POST /api/oracle/generation: the page's model views send a generated sequence and some of its logits
  (base64 f32) as JSON; the answer is the transformers oracle's verdict per run (host/oracle/model.py
  verify_generation), one request at a time. A server made with `oracle=None` answers 404, and one
  without torch/transformers says why it judged nothing: the page then shows "not checked".
- Any path that is not plainly inside its root (`..`, encoded or not, absolute, symlinked out) is 404.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import threading
import urllib.parse
from pathlib import Path

__all__ = ["LabServer", "MAX_UPLOAD_BYTES", "MIME_TYPES", "generation_oracle"]

MAX_UPLOAD_BYTES = 256 * 1024 * 1024
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")        # one range, first byte given (no suffix ranges)
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".zip": "application/zip",
    ".whl": "application/zip",
    ".wgsl": "text/plain; charset=utf-8",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
    ".ts": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def generation_oracle(payload: dict) -> dict:
    """{"runs": [{label, verdict, ...}]} for the page's {"runs": [{label, model, layers, seed, policy,
    prompt_ids, tokens, logits: {step: base64 f32}}]}; {"runs": [], "reason"} where no oracle is installed."""
    try:
        import torch            # noqa: F401  (the oracle extra)
        import transformers     # noqa: F401
    except ImportError as error:
        return {"runs": [], "reason": f"the dev server has no transformers oracle ({error}); install the "
                                      f"`oracle` extra (scripts/setup.sh does)"}
    import numpy as np

    from .oracle.model import verify_generation

    runs = []
    for run in payload["runs"]:
        logits = {int(step): np.frombuffer(base64.b64decode(text), np.float32)
                  for step, text in run["logits"].items()}
        try:
            judged = verify_generation(run, logits)
        except (ValueError, KeyError, TypeError) as error:
            judged = {"verdict": "not checked", "reason": f"the oracle could not judge this run: {error}"}
        runs.append({"label": run.get("label"), **judged})
    return {"runs": runs}


def _safe_join(root: Path, url_path: str) -> Path | None:
    """The file under `root` that `url_path` names, or None if it is not plainly inside root."""
    parts = urllib.parse.unquote(url_path).split("/")
    if any(p in ("..", ".") or "\\" in p or "\x00" in p for p in parts):
        return None
    candidate = (root / "/".join(p for p in parts if p)).resolve()
    if candidate != root and root not in candidate.parents:
        return None
    return candidate


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "webgpu-llm-lab"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            super().log_message(fmt, *args)

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", head=False,
              headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Accept-Ranges", "bytes")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        # Cross-origin isolation: performance.now steps of 5 us instead of 100 us (host-cost figures).
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _get(self, head: bool):
        path = urllib.parse.urlsplit(self.path).path
        if path.endswith("/"):
            path += "index.html"
        target = _safe_join(self.server.web_root, path)
        if target is None or not target.is_file():
            return self._send(404, b"not found\n", head=head)
        content_type = MIME_TYPES.get(target.suffix, "application/octet-stream")
        wanted = self.headers.get("Range")
        if wanted is None:
            return self._send(200, target.read_bytes(), content_type, head=head)
        size = target.stat().st_size
        match = _RANGE.fullmatch(wanted.strip())
        first = int(match[1]) if match else -1
        last = min(int(match[2]), size - 1) if match and match[2] else size - 1
        if not match or first >= size or last < first:
            return self._send(416, f"range {wanted!r} is not within the file's {size} bytes\n".encode(),
                              head=head, headers={"Content-Range": f"bytes */{size}"})
        with open(target, "rb") as file:
            file.seek(first)
            body = file.read(last - first + 1)
        self._send(206, body, content_type, head=head, headers={"Content-Range": f"bytes {first}-{last}/{size}"})

    def do_GET(self):
        self._get(head=False)

    def do_HEAD(self):
        self._get(head=True)

    def do_POST(self):
        if urllib.parse.urlsplit(self.path).path == "/api/oracle/generation":
            return self._oracle()
        parts = urllib.parse.urlsplit(self.path).path.split("/")
        # ['', 'api', 'results', run, name]
        if len(parts) != 5 or parts[1:3] != ["api", "results"] or not all(
                _PLAIN_NAME.fullmatch(p) for p in parts[3:]):
            self._drain()
            return self._send(404, b"not found\n")
        length = int(self.headers.get("Content-Length") or -1)
        if length < 0 or length > MAX_UPLOAD_BYTES:
            self.close_connection = True
            return self._send(413, f"upload must have a Content-Length of at most {MAX_UPLOAD_BYTES}\n".encode())
        body = self.rfile.read(length)
        folder = self.server.results_root / parts[3]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / parts[4]).write_bytes(body)
        self._send(200, b"stored\n")

    def _oracle(self):
        if self.server.oracle is None:
            self._drain()
            return self._send(404, b"this server has no oracle\n")
        length = int(self.headers.get("Content-Length") or -1)
        if length < 0 or length > MAX_UPLOAD_BYTES:
            self.close_connection = True
            return self._send(413, f"a request must have a Content-Length of at most {MAX_UPLOAD_BYTES}\n".encode())
        try:
            payload = json.loads(self.rfile.read(length))
            if not isinstance(payload, dict) or not isinstance(payload.get("runs"), list):
                raise ValueError("the body must be {\"runs\": [...]}")
        except ValueError as error:
            return self._send(400, f"bad oracle request: {error}\n".encode())
        with self.server.oracle_lock:          # one oracle at a time: each holds a model in CPU memory
            answer = self.server.oracle(payload)
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _drain(self):
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= MAX_UPLOAD_BYTES:
            self.rfile.read(length)


class LabServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, web_root: Path, results_root: Path, port: int = 0, verbose: bool = False,
                 oracle=generation_oracle):
        self.oracle = oracle
        self.oracle_lock = threading.Lock()
        self.web_root = Path(web_root).resolve()
        self.results_root = Path(results_root).resolve()
        self.verbose = verbose
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                  name="lab-server", daemon=True)
        thread.start()
        return thread
