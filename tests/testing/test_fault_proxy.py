"""The fault-injecting proxy of the store-fault tests: each fault does what it says to the
client and to the server, unharmed requests pass unchanged over kept-alive connections, and it
stops with requests stalled."""

import contextlib
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servers.fault_proxy import CUT, LOSE, RESET, STALL, TRUNCATE, FaultProxy

BROKEN = (ConnectionError, http.client.HTTPException)  # a reset, or a connection closed early


@pytest.fixture
def server():
    """An HTTP/1.1 server keeping what is PUT ({path: body}) and answering GETs with it."""
    stored: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_PUT(self):
            stored[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
            self._answer(200, b"")

        def do_GET(self):
            self._answer(200, stored[self.path]) if self.path in stored else self._answer(404, b"")

        def _answer(self, status, body):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle(self):
            with contextlib.suppress(ConnectionError):  # the resets are the point
                super().handle()

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address, stored
    httpd.shutdown()
    httpd.server_close()


def request(proxy, method, path, body=None):
    connection = http.client.HTTPConnection(*proxy.address, timeout=10)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_unharmed_requests_pass_over_one_connection(server):
    address, stored = server
    with FaultProxy(address) as proxy:
        connection = http.client.HTTPConnection(*proxy.address, timeout=10)
        for i in range(5):
            connection.request("PUT", f"/k{i}", body=bytes([i]) * 1000)
            assert connection.getresponse().read() == b""
            connection.request("GET", f"/k{i}")
            assert connection.getresponse().read() == bytes([i]) * 1000
        connection.close()
        assert proxy.count("PUT", fault=None) == 5 and proxy.count("GET", fault=None) == 5


def test_each_fault_does_what_it_says(server):
    address, stored = server
    with FaultProxy(address) as proxy:
        proxy.add(503, "PUT", "/a", times=2)
        assert request(proxy, "PUT", "/a", b"x") == (503, b"")
        assert request(proxy, "PUT", "/a", b"x") == (503, b"")
        assert "/a" not in stored  # answered by the proxy
        proxy.add(CUT, "PUT", "/b")
        with pytest.raises(BROKEN):
            request(proxy, "PUT", "/b", b"y" * 100_000)
        proxy.add(LOSE, "PUT", "/c")
        with pytest.raises(BROKEN):
            request(proxy, "PUT", "/c", b"z" * 1000)
        proxy.wait_for(lambda: "/c" in stored, 10, "the lost PUT stored")
        assert stored["/c"] == b"z" * 1000 and "/b" not in stored
        proxy.add(TRUNCATE, "GET", "/c")
        with pytest.raises(http.client.IncompleteRead) as raised:
            request(proxy, "GET", "/c")
        assert len(raised.value.partial) == 500
        proxy.add(RESET, "GET", "/c")
        with pytest.raises(BROKEN):
            request(proxy, "GET", "/c")
        assert request(proxy, "GET", "/c") == (200, b"z" * 1000)  # the rules are used up
        proxy.down = True
        with pytest.raises(BROKEN):
            request(proxy, "GET", "/c")
        proxy.down = False
        # a connection made while down is reset before any request: none is counted
        assert [proxy.count(fault=f) for f in (503, CUT, LOSE, TRUNCATE, RESET)] == [2, 1, 1, 1, 1]


def test_a_stalled_request_ends_when_released_or_when_the_proxy_stops(server):
    address, stored = server
    errors = []

    def stalled(proxy):
        try:
            request(proxy, "GET", "/x")
        except BROKEN as e:
            errors.append(e)

    proxy = FaultProxy(address)
    with proxy:
        proxy.add(STALL, "GET", times=2)
        first = threading.Thread(target=stalled, args=(proxy,))
        first.start()
        proxy.wait_for(lambda: proxy.count("GET", fault=STALL) == 1, 10, "the stalled GET")
        proxy.release()
        first.join(10)
        assert len(errors) == 1
        second = threading.Thread(target=stalled, args=(proxy,))
        second.start()
        proxy.wait_for(lambda: proxy.count("GET", fault=STALL) == 2, 10, "the second stalled GET")
    second.join(10)
    assert not proxy.running and len(errors) == 2


def test_a_chance_harms_a_share_of_requests_the_same_on_every_run(server):
    address, _ = server
    harmed = []
    for _ in range(2):
        with FaultProxy(address) as proxy:
            proxy.add(503, "PUT", times=1000, chance=0.25)
            statuses = [request(proxy, "PUT", "/k", b"v")[0] for _ in range(40)]
        harmed.append(statuses)
    assert harmed[0] == harmed[1] and 0 < harmed[0].count(503) < 40
