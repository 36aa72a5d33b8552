"""The delaying proxy the remote bench puts in front of every reader: bytes pass unchanged and in
order, each direction pays the delay, requests are counted, and it stops with connections open."""

import http.client
import os
import socket
import threading
import time

import pytest

from servers.delay_proxy import DelayProxy, RequestCounter
from servers.nginx import Nginx


@pytest.fixture
def sink_server():
    """A TCP server that answers each connection's first line with the bytes it names, then
    echoes until the client closes: (host, port)."""
    listener = socket.create_server(("127.0.0.1", 0))
    payloads: dict[bytes, bytes] = {}

    def serve(connection):
        with connection, connection.makefile("rb") as lines:
            connection.sendall(payloads[lines.readline().strip()])
            while data := lines.read1(1 << 16):
                connection.sendall(data)

    def accept():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname(), payloads
    listener.close()


def _receive(sock, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        piece = sock.recv(1 << 20)
        assert piece, f"closed after {len(data)} of {n} bytes"
        data += piece
    return bytes(data)


def test_bytes_pass_unchanged_and_in_order_both_ways(sink_server):
    address, payloads = sink_server
    payloads[b"big"] = os.urandom(24 << 20)
    upload = os.urandom(6 << 20)
    with DelayProxy(address, 0.002) as proxy, socket.create_connection(proxy.address) as sock:
        sock.sendall(b"big\n")
        assert _receive(sock, len(payloads[b"big"])) == payloads[b"big"]
        sender = threading.Thread(target=sock.sendall, args=(upload,))
        sender.start()
        echoed = _receive(sock, len(upload))
        sender.join()
        assert echoed == upload
        assert proxy.counts.bytes_down == len(payloads[b"big"]) + len(upload)


def test_a_round_trip_pays_the_delay_each_way(sink_server):
    address, payloads = sink_server
    payloads[b"small"] = b"x"
    delay = 0.03
    with DelayProxy(address, delay) as proxy, socket.create_connection(proxy.address) as sock:
        started = time.monotonic()
        sock.sendall(b"small\n")
        assert _receive(sock, 1) == b"x"
        assert time.monotonic() - started >= 2 * delay  # held on the way there and on the way back


def test_requests_are_counted_over_kept_alive_connections(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "f").write_bytes(b"GET /f HTTP/1.1\r\n\r\n" * 100)  # bodies that look like requests
    server = Nginx(tmp_path / "nginx", root)
    server.start()
    try:
        with DelayProxy(("127.0.0.1", server.port), 0.001) as proxy:
            connection = http.client.HTTPConnection(*proxy.address)
            for _ in range(7):
                connection.request("GET", "/f")
                assert connection.getresponse().read() == (root / "f").read_bytes()
            connection.request("POST", "/f", body=b"GET /f HTTP/1.1\r\n\r\n" * 5)
            connection.getresponse().read()
            connection.close()
            assert proxy.reset().requests == 8
            assert proxy.counts.requests == 0  # reset starts again from zero
    finally:
        server.stop()


def test_chunked_bodies_are_skipped_whatever_the_pieces():
    stream = (b"PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"13\r\nGET /x HTTP/1.1\r\n\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n"
              b"GET /b HTTP/1.1\r\nContent-Length: 4\r\n\r\nGET "
              b"HEAD /c HTTP/1.1\r\n\r\n")
    for size in (1, 3, 7, len(stream)):
        found: list[int] = []
        counter = RequestCounter(lambda found=found: found.append(1))
        for i in range(0, len(stream), size):
            counter.feed(stream[i:i + size])
        assert len(found) == 3, size


def test_stopping_with_connections_open_ends_the_proxy(sink_server):
    address, payloads = sink_server
    payloads[b"small"] = b"x"
    proxy = DelayProxy(address, 0.001)
    with proxy:
        held = [socket.create_connection(proxy.address) for _ in range(3)]
        for sock in held:
            sock.sendall(b"small\n")
            assert _receive(sock, 1) == b"x"
    try:
        assert not proxy.running
        for sock in held:
            sock.settimeout(5)
            assert sock.recv(1) == b""  # closed by the proxy
    finally:
        for sock in held:
            sock.close()
