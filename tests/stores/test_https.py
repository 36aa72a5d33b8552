"""https:// through real mounts: nginx serving with a certificate from a throwaway CA made here
(testing/tls.py), both as an https:// source and as a TLS front of a real S3 server (SeaweedFS).
The CA is trusted only through -o ca_file; without it, or with a certificate for another host, the
mount fails in one line and nothing is sent in the clear."""


import numpy as np
import pytest
import zarr

from mounting import failed_start, mounted, settled
from servers.nginx import Nginx
from servers.seaweed import unique_prefix
from servers.tls import CertificateAuthority


def served(server: Nginx) -> list[str]:
    """The server's access log once it is idle: nginx logs a request after its answer, so a
    request just answered may not be in it yet."""
    return settled(server.directory / "access.log").splitlines()


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def tls_front(seaweed, ca, tmp_path):
    """nginx with a certificate for 127.0.0.1 from `ca`, in front of SeaweedFS's S3 port."""
    server = Nginx(tmp_path / "nginx", tmp_path, certificate=ca.issue("front"), upstream=seaweed.endpoint)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_an_https_source_is_read_byte_exact_with_its_ca_file(ca, tmp_path):
    root = tmp_path / "www"
    group = zarr.open_group(str(root / "data.zarr"), mode="w")
    values = np.random.default_rng(3).normal(size=(40, 50)).astype("<f8")
    group.create_array("a", shape=values.shape, chunks=(16, 16), shards=(32, 32), dtype="f8")[...] = values
    zarr.consolidate_metadata(str(root / "data.zarr"))  # HTTP cannot list
    server = Nginx(tmp_path / "nginx", root, certificate=ca.issue("site"))
    server.start()
    try:
        with mounted(f"{server.url}/data.zarr", tmp_path, "ro", f"ca_file={ca.cert}") as m:
            assert np.array_equal(np.fromfile(m / "a.bin", "<f8").reshape(values.shape), values)
        assert served(server), "the reads went through this server"
    finally:
        server.stop()


def test_an_s3_endpoint_over_https_reads_and_writes(seaweed, tls_front, ca, tmp_path):
    prefix = unique_prefix("tls")
    array = zarr.open_group(seaweed.zarr_store(prefix), mode="w").create_array(
        "a", shape=(64,), chunks=(8,), shards=(32,), dtype="u2")
    array[...] = np.arange(64)
    with mounted(seaweed.url(prefix), tmp_path, f"endpoint={tls_front.url}", f"ca_file={ca.cert}",
                 env=seaweed.env()) as m:
        assert np.fromfile(m / "a.bin", "<u2").tolist() == list(range(64))
        with open(m / "a.bin", "r+b") as f:
            f.seek(2 * 10)
            f.write(np.array([1000, 1001], "<u2").tobytes())
    expected = np.arange(64)
    expected[10:12] = [1000, 1001]
    assert zarr.open_array(seaweed.zarr_store(prefix + "/a"), mode="r")[...].tolist() == expected.tolist()
    assert any("PUT " in line for line in served(tls_front)), "the write went through TLS"


def test_an_untrusted_certificate_fails_in_one_line_and_nothing_goes_in_the_clear(seaweed, tls_front, tmp_path):
    prefix = unique_prefix("untrusted")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    line = failed_start(seaweed.url(prefix), [f"endpoint={tls_front.url}"], seaweed.env(), tmp_path)
    assert "TLS handshake" in line and "not trusted (UnknownIssuer)" in line and "ca_file" in line, line
    assert served(tls_front) == [], "no request was made without TLS"


def test_a_certificate_for_another_host_fails_in_one_line(seaweed, ca, tmp_path):
    prefix = unique_prefix("wrongname")
    zarr.open_group(seaweed.zarr_store(prefix), mode="w")
    server = Nginx(tmp_path / "nginx", tmp_path, certificate=ca.issue("other", hosts=("other.example",)),
                   upstream=seaweed.endpoint)
    server.start()
    try:
        line = failed_start(seaweed.url(prefix), [f"endpoint={server.url}", f"ca_file={ca.cert}"], seaweed.env(),
                            tmp_path)
        assert "TLS handshake" in line and "NotValidForName" in line, line
        assert served(server) == []
    finally:
        server.stop()


def test_a_ca_file_without_a_certificate_is_one_line(seaweed, tls_front, tmp_path):
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    line = failed_start(seaweed.url("x"), [f"endpoint={tls_front.url}", f"ca_file={bogus}"], seaweed.env(), tmp_path)
    assert "no PEM certificate" in line, line
