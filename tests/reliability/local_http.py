"""A real HTTP server on 127.0.0.1 that misbehaves on purpose, for download tests.

Set as HTTP_PROXY, it receives the builders' requests for their real URLs
(`requests`, which TFDS downloads with, honours the proxy variables); it can
also be fetched directly. What it answers is its `behaviour`:

    not_found     HTTP 404
    html          HTTP 200 with an HTML page (a proxy's login page)
    server_error  HTTP 503, every time
    hang          accepts the connection, reads the request, never answers
    wrong_bytes   HTTP 200, bytes that are not the archive, no Content-Length
    cut           HTTP 200 declaring `size` bytes, sends 4 KiB, closes the connection
    file          HTTP 200 with `body`
"""

from __future__ import annotations

import http.server
import socket
import threading

BEHAVIOURS = ("not_found", "html", "server_error", "hang", "wrong_bytes", "cut", "file")


class LocalServer:
    def __init__(self, behaviour: str, *, body: bytes = b"", size: int = 0):
        assert behaviour in BEHAVIOURS, behaviour
        self.behaviour = behaviour
        self.body = body or bytes(range(256)) * 64  # 16 KiB that are not HTML
        self.size = size
        self.requests: list[str] = []  # the paths asked for (absolute URLs via a proxy)
        self._stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802  (http.server's naming)
                server.requests.append(self.path)
                server._answer(self)

            def log_message(self, *args):
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _answer(self, handler) -> None:
        behaviour = self.behaviour
        if behaviour == "not_found":
            handler.send_error(404)
        elif behaviour == "server_error":
            handler.send_error(503)
        elif behaviour == "html":
            page = b"<!DOCTYPE html>\n<html><body>Please sign in to the proxy.</body></html>\n"
            handler.send_response(200)
            handler.send_header("Content-Type", "text/html; charset=utf-8")
            handler.send_header("Content-Length", str(len(page)))
            handler.end_headers()
            handler.wfile.write(page)
        elif behaviour == "hang":
            self._stop.wait()
        elif behaviour == "wrong_bytes":  # HTTP/1.0 style: the body ends when the connection does.
            handler.send_response(200)
            handler.send_header("Content-Type", "application/octet-stream")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(self.body)
            handler.close_connection = True
        elif behaviour == "cut":
            handler.send_response(200)
            handler.send_header("Content-Length", str(self.size))
            handler.end_headers()
            handler.wfile.write(self.body[:4096])
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)
            handler.close_connection = True
        else:  # file
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(self.body)))
            handler.end_headers()
            handler.wfile.write(self.body)

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_env(proxy: str) -> dict[str, str]:
    """Environment variables that send http:// downloads through `proxy`."""
    return {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": "", "no_proxy": ""}
