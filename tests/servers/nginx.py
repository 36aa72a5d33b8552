"""A real HTTP server that honours Range for tests: nginx, run as our own process with its
configuration, logs and pid file under a temporary directory, on a free loopback port.
With a certificate it speaks only HTTPS; with an upstream it is a TLS front for another server
(an S3 endpoint over https://, as a load balancer makes one). Always stopped, by its own PID."""

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from servers.seaweed import free_ports

CONFIG = """
{user}daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    types {{ application/json json; }}
    default_type application/octet-stream;
    server {{
        listen {ip}:{port}{ssl};
{tls}        root {root};
{upstream}    }}
}}
"""
TLS = """        ssl_certificate {cert};
        ssl_certificate_key {key};
"""
# S3 signs the Host header: it goes through as the client sent it. Bodies stream both ways.
UPSTREAM = """        client_max_body_size 0;
        proxy_request_buffering off;
        proxy_buffering off;
        location / {{
            proxy_pass {upstream};
            proxy_set_header Host $http_host;
            proxy_http_version 1.1;
        }}
"""


def nginx_binary() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


class Nginx:
    """`ip`: the loopback address it binds."""

    def __init__(self, directory: Path, root: Path, ip: str = "127.0.0.1",
                 certificate=None, upstream: str | None = None):
        """`certificate`: a testing.tls.Certificate to serve HTTPS with; `upstream`: a URL to proxy to."""
        self.directory, self.root = Path(directory), Path(root)
        self.ip = ip
        self.certificate, self.upstream = certificate, upstream
        self.port = free_ports(1)[0]
        self.process = None

    @property
    def url(self) -> str:
        return f"{'https' if self.certificate else 'http'}://{self.ip}:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "nginx.conf"
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the test's private files
        tls = TLS.format(cert=self.certificate.cert, key=self.certificate.key) if self.certificate else ""
        upstream = UPSTREAM.format(upstream=self.upstream) if self.upstream else ""
        config.write_text(CONFIG.format(user=user, dir=self.directory, ip=self.ip, port=self.port, root=self.root,
                                        ssl=" ssl" if self.certificate else "", tls=tls, upstream=upstream))
        self.process = subprocess.Popen([nginx_binary(), "-c", str(config), "-p", str(self.directory)],
                                        stdout=subprocess.DEVNULL, stderr=open(self.directory / "stderr", "wb"),
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited: {(self.directory / 'stderr').read_text()}")
            try:
                socket.create_connection((self.ip, self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("nginx did not start") from None
                time.sleep(0.05)

    def requests(self) -> list[str]:
        """The access log's request lines so far: 'GET /path HTTP/1.1' and its status."""
        log = self.directory / "access.log"
        return log.read_text().splitlines() if log.exists() else []

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish and exit
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None
