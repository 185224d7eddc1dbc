import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apiclient import ApiClient, ApiError


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        status, body = (200, {"hello": "world"}) if self.path == "/api/hello" else (404, {"error": "no such thing"})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def base_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api"
    server.shutdown()
    server.server_close()


def test_get(base_url):
    assert ApiClient(base_url).get("/hello") == {"hello": "world"}


def test_not_found(base_url):
    with pytest.raises(ApiError) as info:
        ApiClient(base_url, sleep=lambda s: None).get("/missing")
    assert info.value.status == 404
