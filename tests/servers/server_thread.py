"""An asyncio TCP server on loopback, run by a thread of its own, for the proxies the tests and
benchmarks drive from synchronous code (delay_proxy.py, fault_proxy.py): started and stopped
within a bound, every connection still open cancelled at stop."""

import asyncio
import threading
from collections.abc import Awaitable, Callable

STOP_TIMEOUT = 10.0  # seconds to start or stop the server's thread

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ServerThread:
    def __init__(self, handler: Handler, name: str, on_start: Callable[[], None] | None = None):
        self.handler, self.name, self.on_start = handler, name, on_start  # on_start: in the loop, first
        self.address: tuple[str, int] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.Server | None = None
        self._error: BaseException | None = None

    def start(self) -> tuple[str, int]:
        """The address it listens on, once it does; RuntimeError naming why it did not start."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(STOP_TIMEOUT) or self._error:
            self.stop()
            raise RuntimeError(f"the {self.name} did not start: {self._error}")
        return self.address

    @property
    def native_id(self) -> int | None:
        """The thread's id in the kernel (/proc/self/task/ID): a benchmark leaves its CPU out."""
        return None if self._thread is None else self._thread.native_id

    @property
    def running(self) -> bool:
        """Whether its thread still runs (after stop(): never, unless it did not end in time)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self.loop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._shutdown)
        self._thread.join(STOP_TIMEOUT)

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.loop.run_until_complete(self._listen())
            self.loop.run_forever()
        except BaseException as e:  # reported by start()
            self._error = e
            self._ready.set()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _listen(self) -> None:
        if self.on_start is not None:
            self.on_start()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.address = self._server.sockets[0].getsockname()[:2]
        self._ready.set()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await self.handler(reader, writer)
        finally:
            self._tasks.discard(task)

    def _shutdown(self) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        self.loop.create_task(self._stop_when_done())

    async def _stop_when_done(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.loop.stop()
