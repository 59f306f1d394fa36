"""The dev server: serves web/ on 127.0.0.1 only and takes result uploads from headless pages.

- GET/HEAD: files under web/ (the vendored Pyodide and wheels live in web/vendor/), with explicit
  MIME types (application/wasm matters: streaming compilation refuses anything else) and
  `Cache-Control: no-store`, so a rebuilt wheel is never served stale.
- POST /api/results/<run>/<name>: the body is stored as <results>/<run>/<name>. Names are plain
  ([A-Za-z0-9._-], no leading dot); bodies are capped.
- Any path that is not plainly inside its root (`..`, encoded or not, absolute, symlinked out) is 404.
"""

from __future__ import annotations

import http.server
import re
import threading
import urllib.parse
from pathlib import Path

__all__ = ["LabServer", "MAX_UPLOAD_BYTES", "MIME_TYPES"]

MAX_UPLOAD_BYTES = 256 * 1024 * 1024
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

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", head=False):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
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
        self._send(200, target.read_bytes(), content_type, head=head)

    def do_GET(self):
        self._get(head=False)

    def do_HEAD(self):
        self._get(head=True)

    def do_POST(self):
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

    def _drain(self):
        length = int(self.headers.get("Content-Length") or 0)
        if 0 < length <= MAX_UPLOAD_BYTES:
            self.rfile.read(length)


class LabServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *, web_root: Path, results_root: Path, port: int = 0, verbose: bool = False):
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
