"""A redirect never downgrades a scheme. obstore follows redirects itself (reqwest's policy: up
to 10, Authorization dropped on a change of host, nothing else) and has no option to stop it,
so zarrfs speaks HTTPS only unless the user chose plain HTTP: a redirect from an https:// server
to http:// is refused in one line and the request, its credentials with it, is never sent in
clear. A hostile redirector of our own (standard library, TLS from a throwaway CA) answers every
request with a 307 to a plain-HTTP server on another loopback address, which records what it got."""

import contextlib
import http.server
import os
import ssl
import threading

import pytest

from mounting import failed_start
from servers.tls import CertificateAuthority

TOKEN, SECRET = "session-token-TOPSECRET", "secret-key-TOPSECRET"


@contextlib.contextmanager
def serving(handler, host: str, tls=None):
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert, tls.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status: int, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hosts(tmp_path):
    """(the https:// redirector on 127.0.0.1, the CA file to trust it, the requests the
    plain-HTTP server on 127.0.0.2 received: a list of their headers)."""
    ca = CertificateAuthority(tmp_path / "ca")
    received = []

    class Target(Quiet):
        def do_GET(self):
            received.append(dict(self.headers))
            self.answer(404)

        do_HEAD = do_PUT = do_POST = do_GET

    with serving(Target, "127.0.0.2") as target:
        elsewhere = f"http://127.0.0.2:{target.server_address[1]}"

        class Redirector(Quiet):
            def do_GET(self):
                self.answer(307, [("Location", f"{elsewhere}{self.path}")])

            do_HEAD = do_PUT = do_POST = do_GET

        with serving(Redirector, "127.0.0.1", ca.issue("redirector")) as redirector:
            yield f"https://127.0.0.1:{redirector.server_address[1]}", ca.cert, received


def test_an_https_source_redirected_to_http_is_refused_in_one_line(hosts, tmp_path):
    url, ca_file, received = hosts
    line = failed_start(f"{url}/data.zarr", ["ro", f"ca_file={ca_file}"], None, tmp_path)
    assert "redirected to plain HTTP (http://127.0.0.2:" in line and "refused" in line, line
    assert received == [], line


def test_an_s3_endpoint_redirecting_to_http_never_sends_the_credentials_in_clear(hosts, tmp_path):
    url, ca_file, received = hosts
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_SESSION_TOKEN=TOKEN)
    line = failed_start("s3://bucket/data.zarr", ["ro", f"endpoint={url}", f"ca_file={ca_file}"], env, tmp_path)
    assert "redirected to plain HTTP (http://127.0.0.2:" in line, line
    assert received == []  # neither the token nor a signature went anywhere in clear
    assert TOKEN not in line and SECRET not in line
