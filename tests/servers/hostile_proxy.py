"""An HTTP proxy in front of a real server that answers chosen GETs as a hostile server would.

Every request is passed on to `upstream` (SeaweedFS, nginx) and its answer passed back, except a
GET whose path ends with a key given in `answers`, which gets what that key's word says instead:

- "huge": `Content-Length: 2**40` (a terabyte announced), then zeros for as long as the client reads
- "oversized": an honest 1 GiB of zeros, far more than any chunk of the tests
- "short": the upstream's own headers, and then half its body before the connection is closed
- "overlong": the upstream's own headers (to a ranged GET, the range asked for in
  `Content-Range`), but 1 GiB of zeros in `Content-Length` and the body
- "endless": the upstream's own headers, then its body a byte every TRICKLE seconds: it never
  ends within any sensible time-out

What it sends is bounded all the same (SEND_LIMIT bytes, SEND_SECONDS seconds per answer), so a
client that never stops reading still ends. `requests(part)` counts the GETs of paths that hold
`part`, hostile or not. Runs in threads of its own on a free loopback port:
`with HostileProxy(("127.0.0.1", port), {...}) as proxy:` starts it and stops it on leaving.
"""

import http.client
import http.server
import threading
import time
from collections import Counter

HUGE = 1 << 40
OVERSIZED = 1 << 30
PIECE = 1 << 20
SEND_LIMIT = 2 << 30  # bytes one hostile answer sends at most
SEND_SECONDS = 60.0  # seconds one hostile answer lasts at most
TRICKLE = 0.5
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class HostileProxy:
    def __init__(self, upstream: tuple[str, int], answers: dict[str, str]):
        self.upstream = upstream
        self.answers = dict(answers)
        self.counts: Counter = Counter()
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hostile-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def requests(self, part: str) -> int:
        """GETs so far of paths that hold `part`."""
        with self._lock:
            return sum(n for path, n in self.counts.items() if part in path)


def _handler(proxy: HostileProxy):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        upstream_connection = None

        def log_message(self, *args):  # quiet: the tests read the daemon's log, not this one
            pass

        def do_GET(self):
            path = self.path.partition("?")[0]
            with proxy._lock:
                proxy.counts[path] += 1
            word = next((w for key, w in proxy.answers.items() if path.endswith(key)), None)
            if word is None:
                self._forward()
            else:
                getattr(self, f"_answer_{word}")()

        def do_HEAD(self):
            self._forward()

        def do_PUT(self):
            self._forward()

        def do_POST(self):
            self._forward()

        def do_DELETE(self):
            self._forward()

        def _forward(self):
            status, headers, body = self._upstream()
            self._send_head(status, headers, len(body))
            if self.command != "HEAD":
                self.wfile.write(body)

        def _upstream(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self.upstream_connection is None:
                self.upstream_connection = http.client.HTTPConnection(*proxy.upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if body is not None:
                headers["Content-Length"] = str(length)
            self.upstream_connection.request(self.command, self.path, body=body, headers=headers)
            response = self.upstream_connection.getresponse()
            data = response.read()
            return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP], data

        def _send_head(self, status, headers, length):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(length))
            self.end_headers()

        def _zeros(self, total: int):
            """Up to `total` zeros (bounded by SEND_LIMIT and SEND_SECONDS), until the client leaves."""
            sent, deadline, piece = 0, time.monotonic() + SEND_SECONDS, bytes(PIECE)
            try:
                while sent < min(total, SEND_LIMIT) and time.monotonic() < deadline:
                    self.wfile.write(piece)
                    sent += PIECE
            except OSError:
                pass  # the client hung up: what a bounded client does
            self.close_connection = True

        def _answer_huge(self):
            self._send_head(200, [("Content-Type", "application/octet-stream")], HUGE)
            self._zeros(HUGE)

        def _answer_oversized(self):
            self._send_head(200, [("Content-Type", "application/octet-stream")], OVERSIZED)
            self._zeros(OVERSIZED)

        def _answer_endless(self):
            status, headers, body = self._upstream()
            self._send_head(status, headers, len(body))
            deadline = time.monotonic() + SEND_SECONDS
            try:
                for i in range(len(body)):
                    if time.monotonic() > deadline:
                        break
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(TRICKLE)
            except OSError:
                pass
            self.close_connection = True

        def _answer_overlong(self):
            status, headers, _ = self._upstream()
            self._send_head(status, headers, OVERSIZED)
            self._zeros(OVERSIZED)

        def _answer_short(self):
            status, headers, body = self._upstream()
            self._send_head(status, headers, len(body))
            self.wfile.write(body[:len(body) // 2])
            self.close_connection = True

    return Handler
