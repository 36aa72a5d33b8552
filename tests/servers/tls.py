"""A throwaway certificate authority for tests: a CA made in a temporary directory and server
certificates it signs, through the openssl command line (on every Debian machine; nothing to
install). Nothing is added to the machine's trust store: a client trusts the CA only when told
(`-o ca_file=`)."""

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "2"  # long enough for any test run, useless afterwards


@dataclass(frozen=True)
class Certificate:
    cert: Path  # PEM
    key: Path  # PEM, unencrypted


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "zarrfs test CA"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = self.directory / "ca.pem", self.directory / "ca.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", str(self.key), "-out", str(self.cert), "-days", DAYS, "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(self, name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Certificate:
        """A server certificate for `hosts` (IP addresses and DNS names), signed by this CA."""
        key, request, cert = (self.directory / f"{name}.{suffix}" for suffix in ("key", "csr", "pem"))
        extensions = self.directory / f"{name}.ext"
        names = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
        extensions.write_text(f"subjectAltName={names}\nbasicConstraints=CA:FALSE\n"
                              f"keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                 "-out", str(request), "-subj", f"/CN={hosts[0]}")
        _openssl("x509", "-req", "-in", str(request), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-CAcreateserial", "-out", str(cert), "-days", DAYS, "-extfile", str(extensions))
        return Certificate(cert, key)
