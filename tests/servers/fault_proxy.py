"""An HTTP/1.1 proxy that injects faults between a client and an object store, for tests.

It relays one request and its response at a time per connection (object-store clients do not
pipeline), and before each request asks its rules whether to harm it:

- CUT: half the request body goes to the server, then both connections are reset (a PUT cut
  while its body is being sent);
- RESET: the client's connection is reset as soon as the request has arrived;
- STALL: the request is held unanswered until the proxy stops or `release()` is called;
- TRUNCATE: the response's head and half its body reach the client, then the connection is
  closed (a FIN, so the client reads the half before the end);
- LOSE: the request reaches the server and takes effect, but the answer is dropped and the
  client's connection reset (a PUT that landed, whose sender cannot know it);
- a status code (503, 500): answered at once by the proxy, the server never sees the request.

`down = True` resets every new connection and every request (a server that is gone), until
set back to False. Each request is recorded as (method, path, fault) in `seen`; tests wait for
the record they expect (`wait_for`), never for an instant. Bodies are read whole into memory:
this is a tool for tests' small arrays, not for benchmarks (delay_proxy.py bounds its memory).

Runs in a thread with its own event loop; `with FaultProxy((host, port)) as proxy:` listens on
a free loopback port and stops on leaving, closing every connection.
"""

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass

from servers.server_thread import ServerThread

CUT, RESET, STALL, TRUNCATE, LOSE = "cut", "reset", "stall", "truncate", "lose"
PIECE = 64 << 10
REASONS = {500: "Internal Server Error", 503: "Service Unavailable"}


@dataclass
class Rule:
    """Harm the next `times` requests whose method is `method` (None: any) and whose path holds
    `path` (a substring), with `fault` (one of the faults above, or an HTTP status code); with
    `chance` below 1, each matching request only with that probability (a seeded draw)."""

    fault: str | int
    method: str | None = None
    path: str = ""
    times: int = 1
    chance: float = 1.0

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and (self.method is None or self.method == method) and self.path in path


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    fault: str | int | None


class _Reset(Exception):
    """The connection is to be reset."""


class _Close(Exception):
    """The connection is to be closed after what was written."""


class FaultProxy:
    """Listens on 127.0.0.1 (a free port) and relays to `target` (host, port)."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.address: tuple[str, int] | None = None
        self.down = False
        self.seen: list[Seen] = []
        self._rules: list[Rule] = []
        self._random = random.Random(0)  # the same faults on every run
        self._lock = threading.Lock()
        self._released: asyncio.Event | None = None
        self._server = ServerThread(self._connection, "fault proxy", on_start=self._made_in_loop)

    @property
    def endpoint(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    def add(self, fault: str | int, method: str | None = None, path: str = "", times: int = 1,
            chance: float = 1.0) -> Rule:
        """A new rule, tried after the earlier ones."""
        rule = Rule(fault, method, path, times, chance)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """No more faults; stalled requests are released."""
        with self._lock:
            self._rules.clear()
        self.release()

    def release(self) -> None:
        """Stalled requests end now (their connections are reset)."""
        if self._server.loop is not None and self._released is not None:
            self._server.loop.call_soon_threadsafe(self._released.set)

    def count(self, method: str | None = None, path: str = "", fault: object = ...) -> int:
        """Requests seen with this method, a path holding `path`, and this fault (None: relayed
        unharmed; ...: any)."""
        with self._lock:
            return sum(1 for s in self.seen if (method is None or s.method == method) and path in s.path
                       and (fault is ... or s.fault == fault))

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "the requests") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the proxy did not see {what}: {self.seen[-10:]}")
            time.sleep(0.02)

    def _fault_for(self, method: str, path: str) -> str | int | None:
        with self._lock:
            fault = RESET if self.down else None
            for rule in self._rules:
                if fault is None and rule.matches(method, path) and self._random.random() < rule.chance:
                    rule.times -= 1
                    fault = rule.fault
            self.seen.append(Seen(method, path, fault))
            return fault

    def __enter__(self) -> "FaultProxy":
        self.address = self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()

    @property
    def running(self) -> bool:
        return self._server.running

    def _made_in_loop(self) -> None:
        self._released = asyncio.Event()  # stalled requests wait on it, in the server's loop

    async def _connection(self, client_in, client_out) -> None:
        link = _Link(client_in, client_out)
        try:
            if self.down:
                raise _Reset
            while True:
                await self._exchange(link)
        except _Reset:
            _reset(client_out)
            if link.server_out is not None:
                _reset(link.server_out)
        except (_Close, OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            for writer in (client_out, link.server_out):
                if writer is not None:
                    writer.close()

    async def _exchange(self, link: "_Link") -> None:
        """One request and its response."""
        client_in, client_out = link.client_in, link.client_out
        try:
            head = await client_in.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            raise EOFError from e  # the client closed between requests
        method, path, fields = _parse_head(head)
        length = int(fields.get("content-length", "0") or 0)
        fault = self._fault_for(method, path)
        if fault == RESET:
            raise _Reset
        if fault == CUT:
            half = await client_in.readexactly(length // 2)
            server_out = await link.server(self.target)
            server_out.write(head + half)
            await server_out.drain()
            raise _Reset
        body = await client_in.readexactly(length)
        if isinstance(fault, int):
            client_out.write(f"HTTP/1.1 {fault} {REASONS.get(fault, 'Error')}\r\nContent-Length: 0\r\n\r\n".encode())
            await client_out.drain()
            return
        if fault == STALL:
            await self._released.wait()
            raise _Reset
        server_out = await link.server(self.target)
        server_out.write(head + body)
        await server_out.drain()
        if fault == LOSE:
            await _relay_response(link.server_in, _Discard(), method, False)
            raise _Reset
        await _relay_response(link.server_in, client_out, method, fault == TRUNCATE)


class _Discard:
    """A sink for an answer nobody is to see."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


@dataclass
class _Link:
    """A client's connection and the server connection its requests go on (made at the first)."""

    client_in: asyncio.StreamReader
    client_out: asyncio.StreamWriter
    server_in: asyncio.StreamReader | None = None
    server_out: asyncio.StreamWriter | None = None

    async def server(self, target) -> asyncio.StreamWriter:
        if self.server_out is None:
            self.server_in, self.server_out = await asyncio.open_connection(*target)
        return self.server_out


def _parse_head(head: bytes) -> tuple[str, str, dict]:
    lines = head.decode("latin-1").split("\r\n")
    method, path = (lines[0].split(" ") + ["", ""])[:2]
    fields = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    return method, path, fields


async def _relay_response(server_in, client_out, method: str, truncate: bool) -> None:
    """The server's response to the client: by Content-Length, chunked, or up to the end of the
    connection. `truncate`: half the body by Content-Length, then the end of the connection."""
    head = await server_in.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    _, _, fields = _parse_head(head)
    client_out.write(head)
    if method == "HEAD" or status in (204, 304) or status < 200:
        await client_out.drain()
        return
    if "content-length" in fields:
        length = int(fields["content-length"])
        if truncate:
            client_out.write(await server_in.readexactly(length // 2))
            await client_out.drain()
            raise _Close
        await _relay_bytes(server_in, client_out, length)
    elif "chunked" in fields.get("transfer-encoding", ""):
        await _relay_chunks(server_in, client_out)
    else:
        while data := await server_in.read(PIECE):
            client_out.write(data)
            await client_out.drain()
        raise EOFError
    await client_out.drain()


async def _relay_bytes(source, sink, length: int) -> None:
    while length:
        data = await source.read(min(PIECE, length))
        if not data:
            raise EOFError
        sink.write(data)
        await sink.drain()
        length -= len(data)


async def _relay_chunks(source, sink) -> None:
    while True:
        line = await source.readuntil(b"\r\n")
        sink.write(line)
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (trailer := await source.readuntil(b"\r\n")) != b"\r\n":
                sink.write(trailer)
            sink.write(b"\r\n")
            return
        await _relay_bytes(source, sink, size + 2)


def _reset(writer) -> None:
    """Close with a TCP reset (RST), not a FIN: the peer sees ECONNRESET."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
