"""The dev server: loopback only, path containment, MIME types, no-store, uploads."""

from __future__ import annotations

import http.client
import socket

import pytest

from py_runtime.host.serve import MAX_UPLOAD_BYTES, LabServer


@pytest.fixture
def server(tmp_path):
    web = tmp_path / "web"
    (web / "vendor/pyodide").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html>hello")
    (web / "main.js").write_text("export {}")
    (web / "vendor/pyodide/pyodide.asm.wasm").write_bytes(b"\0asm")
    (web / "vendor/lab.whl").write_bytes(b"PK")
    (tmp_path / "secret.txt").write_text("outside the root")
    server = LabServer(web_root=web, results_root=tmp_path / "results")
    server.start_in_thread()
    yield server
    server.shutdown()
    server.server_close()


def _raw_request(server, method, path, body=None, headers=None):
    """http.client sends the path exactly as given (browsers would normalise `..` away)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def test_binds_loopback_only(server):
    assert server.server_address[0] == "127.0.0.1"
    assert server.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("path", ["/../secret.txt", "/vendor/../../secret.txt", "/%2e%2e/secret.txt",
                                  "/vendor/%2E%2E/%2e%2e/secret.txt", "/..%2fsecret.txt", "/./index.html",
                                  "/missing.js", "/vendor/..\\..\\secret.txt"])
def test_paths_outside_the_root_or_missing_are_404(server, path):
    response, data = _raw_request(server, "GET", path)
    assert response.status == 404
    assert b"outside the root" not in data


@pytest.mark.parametrize("path,mime", [
    ("/", "text/html; charset=utf-8"), ("/main.js", "text/javascript; charset=utf-8"),
    ("/vendor/pyodide/pyodide.asm.wasm", "application/wasm"), ("/vendor/lab.whl", "application/zip"),
])
def test_serves_files_with_mime_types_and_no_store(server, path, mime):
    response, _ = _raw_request(server, "GET", path)
    assert response.status == 200
    assert response.getheader("Content-Type") == mime
    assert response.getheader("Cache-Control") == "no-store"


def test_upload_is_stored_under_results(server, tmp_path):
    response, _ = _raw_request(server, "POST", "/api/results/run-1/out.f32", body=b"\x01\x02\x03\x04")
    assert response.status == 200
    assert (tmp_path / "results/run-1/out.f32").read_bytes() == b"\x01\x02\x03\x04"


@pytest.mark.parametrize("path", ["/api/results/../x", "/api/results/run/.hidden", "/api/results/run",
                                  "/api/results/a/b/c", "/api/other/run/x", "/api/results/run/%2e%2e"])
def test_upload_with_unplain_names_is_404_and_writes_nothing(server, tmp_path, path):
    response, _ = _raw_request(server, "POST", path, body=b"x")
    assert response.status == 404
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*"))


def test_oversized_upload_is_refused_without_reading_it(server):
    sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
    sock.sendall(f"POST /api/results/run/big HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_UPLOAD_BYTES + 1}\r\n\r\n".encode())
    reply = sock.recv(1024)
    sock.close()
    assert reply.startswith(b"HTTP/1.1 413")


def test_the_oracle_endpoint_answers_json_refuses_bad_requests_and_is_absent_without_an_oracle(tmp_path):
    import json

    asked = []
    server = LabServer(web_root=tmp_path, results_root=tmp_path / "results",
                       oracle=lambda payload: asked.append(payload) or {"runs": [{"label": "a", "verdict": "passed"}]})
    absent = LabServer(web_root=tmp_path, results_root=tmp_path / "results", oracle=None)
    for s in (server, absent):
        s.start_in_thread()
    try:
        body = json.dumps({"runs": [{"label": "a"}]}).encode()
        response, data = _raw_request(server, "POST", "/api/oracle/generation", body)
        assert response.status == 200 and response.getheader("Content-Type") == "application/json"
        assert json.loads(data) == {"runs": [{"label": "a", "verdict": "passed"}]}
        assert asked == [{"runs": [{"label": "a"}]}]
        response, data = _raw_request(server, "POST", "/api/oracle/generation", b"{not json")
        assert response.status == 400 and b"bad oracle request" in data
        response, data = _raw_request(server, "POST", "/api/oracle/generation", b'{"runs": 3}')
        assert response.status == 400 and len(asked) == 1
        response, _ = _raw_request(absent, "POST", "/api/oracle/generation", body)
        assert response.status == 404
    finally:
        for s in (server, absent):
            s.shutdown()
            s.server_close()


def test_a_range_request_gets_206_with_those_bytes_and_one_past_the_end_416(server):
    response, data = _raw_request(server, "GET", "/index.html", headers={"Range": "bytes=2-6"})
    assert response.status == 206 and data == b"docty"
    assert response.getheader("Content-Range") == "bytes 2-6/20"
    response, data = _raw_request(server, "GET", "/index.html", headers={"Range": "bytes=15-"})
    assert response.status == 206 and data == b"hello"
    response, data = _raw_request(server, "GET", "/index.html", headers={"Range": "bytes=15-99"})
    assert response.status == 206 and data == b"hello"
    for wanted in ("bytes=20-25", "bytes=-5", "bytes=6-2", "lines=1-2"):
        response, data = _raw_request(server, "GET", "/index.html", headers={"Range": wanted})
        assert response.status == 416, wanted
        assert response.getheader("Content-Range") == "bytes */20"
    response, _ = _raw_request(server, "HEAD", "/index.html")
    assert response.status == 200 and response.getheader("Content-Length") == "20"
