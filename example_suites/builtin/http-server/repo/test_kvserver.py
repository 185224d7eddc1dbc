import http.client
import threading

import pytest

from kvserver import make_server


@pytest.fixture
def conn():
    server = make_server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    c = http.client.HTTPConnection(*server.server_address, timeout=30)
    yield c
    c.close()
    server.shutdown()
    server.server_close()


def test_put_then_get(conn):
    conn.request("PUT", "/kv/greeting", body=b"hello")
    r = conn.getresponse()
    r.read()
    assert r.status == 201
    conn.request("GET", "/kv/greeting")
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, b"hello")
