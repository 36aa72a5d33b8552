"""A TCP proxy that adds a round trip, for a kernel without netem: every reader of a benchmark
talks to a server through one, so all pay the same latency.

Each piece of bytes read from one side is held until its arrival time plus the one-way delay,
then written to the other side, in order. A direction's queue holds at most QUEUED bytes:
beyond that the proxy stops reading that side (TCP's own flow control does the rest), so memory
stays bounded whatever the peers do. It counts the HTTP/1.1 requests clients send (request
heads, bodies skipped by Content-Length or chunked framing) and the bytes each way.

Runs in a thread of its own with its own event loop; `with DelayProxy(...) as proxy:` starts
it on a free loopback port and stops it, closing every connection, on leaving.
"""

import asyncio
import contextlib
import time
from dataclasses import dataclass

from servers.server_thread import ServerThread

PIECE = 64 << 10  # bytes read at a time
QUEUED = 32 << 20  # bytes a direction holds before it stops reading: 800 MB/s at 20 ms each way


@dataclass
class Counts:
    requests: int = 0
    bytes_up: int = 0  # client to server
    bytes_down: int = 0


class RequestCounter:
    """Finds the HTTP/1.1 requests in a client's byte stream, fed in pieces of any size, and
    calls `on_request` for each."""

    def __init__(self, on_request):
        self.on_request = on_request
        self._head = b""
        self._body = 0  # bytes of the current body still to skip
        self._chunked = self._trailers = False
        self._chunk_line = b""

    def feed(self, data: bytes) -> None:
        while data:
            if self._body:
                skip = min(self._body, len(data))
                self._body -= skip
                data = data[skip:]
            elif self._chunked:
                data = self._feed_chunk_line(data)
            else:
                data = self._feed_head(data)

    def _feed_head(self, data: bytes) -> bytes:
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            return b""
        head, rest = self._head[:end], self._head[end + 4:]
        self._head = b""
        self.on_request()
        fields = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
        fields = {k.strip().lower(): v.strip().lower() for k, v in fields.items()}
        if b"chunked" in fields.get(b"transfer-encoding", b""):
            self._chunked = True
        else:
            self._body = int(fields.get(b"content-length", b"0") or 0)
        return rest

    def _feed_chunk_line(self, data: bytes) -> bytes:
        """A chunk's size line (then its data and CRLF are skipped); after the last chunk (size
        0), trailer lines up to an empty one."""
        self._chunk_line += data
        end = self._chunk_line.find(b"\r\n")
        if end < 0:
            return b""
        line, rest = self._chunk_line[:end], self._chunk_line[end + 2:]
        self._chunk_line = b""
        if self._trailers:
            self._chunked = self._trailers = bool(line)  # an empty line ends the request
            return rest
        size = int(line.split(b";")[0] or b"0", 16)
        if size == 0:
            self._trailers = True
        else:
            self._body = size + 2
        return rest


class DelayProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to `target` (host, port), `delay`
    seconds each way."""

    def __init__(self, target: tuple[str, int], delay: float):
        self.target, self.delay = target, delay
        self.counts = Counts()
        self.address: tuple[str, int] | None = None
        self._server = ServerThread(self._connection, "delaying proxy")

    @property
    def endpoint(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    @property
    def thread_id(self) -> int | None:
        """Its thread's id in the kernel: the CPU it spends is in-process readers' process time."""
        return self._server.native_id

    def reset(self) -> Counts:
        """The counts so far, starting again from zero."""
        counts, self.counts = self.counts, Counts()
        return counts

    def __enter__(self) -> "DelayProxy":
        self.address = self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()

    @property
    def running(self) -> bool:
        return self._server.running

    async def _connection(self, client_in, client_out) -> None:
        server_out = None
        try:
            server_in, server_out = await asyncio.open_connection(*self.target)
            counter = RequestCounter(lambda: self._count("requests", 1))
            async with asyncio.TaskGroup() as group:  # one direction failing ends the other
                group.create_task(self._pipe(client_in, server_out,
                                             lambda d: (counter.feed(d), self._count("bytes_up", len(d)))))
                group.create_task(self._pipe(server_in, client_out, lambda d: self._count("bytes_down", len(d))))
        except (OSError, ExceptionGroup, asyncio.CancelledError):
            pass
        finally:
            for writer in (client_out, server_out):
                if writer is not None:
                    writer.close()

    def _count(self, field: str, n: int) -> None:
        setattr(self.counts, field, getattr(self.counts, field) + n)

    async def _pipe(self, source, sink, seen) -> None:
        """Bytes from `source` to `sink`, each piece `delay` after it arrived, in order."""
        queue: asyncio.Queue = asyncio.Queue()
        queued, room = 0, asyncio.Event()
        room.set()

        async def receive():
            nonlocal queued
            try:
                while data := await source.read(PIECE):
                    seen(data)
                    await room.wait()  # at most QUEUED bytes held: then the source waits
                    queue.put_nowait((time.monotonic() + self.delay, data))
                    queued += len(data)
                    if queued >= QUEUED:
                        room.clear()
            except OSError:  # reset: the sink is closed after what came before, as after an EOF
                pass
            queue.put_nowait((time.monotonic() + self.delay, b""))

        async def send():
            nonlocal queued
            while True:
                due, data = await queue.get()
                queued -= len(data)
                if queued < QUEUED:
                    room.set()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:  # the source closed: so does the sink, after what came before
                    with contextlib.suppress(OSError):
                        sink.write_eof()
                    return
                sink.write(data)
                await sink.drain()

        receiver = asyncio.ensure_future(receive())
        try:
            await send()
        finally:
            receiver.cancel()
