"""Icechunk repositories on the object stores zarrfs mounts besides S3 (test_icechunk.py): gs://,
az:// and http(s)://, named with -o icechunk and reached with the options and credentials
zarrfs's own stores take for those URLs (stores/icechunk_storage.py); and virtual chunks in an
s3:// container, read with the mount's own S3 credentials on the mount's endpoint only."""

import errno
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

from helpers import small_icechunk_repository
from mounting import ZARRFS, failed_start, mounted
from zarrfs.stores.async_loop import first_line

if sys.version_info >= (3, 12):
    import icechunk
    import zarr

needs_python312 = pytest.mark.needs_python312  # skipped on 3.11, saying so (tests/conftest.py)


def clean_environment() -> dict:
    """The daemon's environment with no cloud's credentials: the mount's options give them."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_", "GOOGLE_"))}


def icechunk_read(storage, snapshot: str, name: str = "a") -> bytes:
    """The array's flat bytes as icechunk-python reads them from `storage` itself."""
    session = icechunk.Repository.open(storage).readonly_session(snapshot_id=snapshot)
    return np.ascontiguousarray(zarr.open_array(session.store, path=name, mode="r")[...]).tobytes()


def doubled(repo) -> str:
    """A second commit on main: `a` doubled."""
    session = repo.writable_session("main")
    array = zarr.open_array(session.store, path="a", mode="a")
    array[...] = array[...] * 2
    return session.commit("doubled")


@needs_python312
def test_a_repository_on_azure_mounts_with_the_mounts_credentials_and_takes_commits(azurite, tmp_path):
    from servers.emulators import AZURE_ACCOUNT, AZURE_KEY

    container = f"c{uuid.uuid4().hex[:12]}"
    azurite.make_container(container)
    storage = icechunk.azure_storage(account=AZURE_ACCOUNT, container=container, prefix="repo", access_key=AZURE_KEY,
                                     config={"endpoint": azurite.endpoint, "allow_http": "true"})
    repo, first = small_icechunk_repository(None, storage)
    second = doubled(repo)
    options = azurite.mount_options("icechunk", f"credentials_file={azurite.credentials_file(tmp_path)}")
    with mounted(f"az://{container}/repo", tmp_path, *options, env=clean_environment()) as m:
        assert (m.path / "a.bin").read_bytes() == icechunk_read(storage, second)
        assert (m.path / f"@{first}" / "a.bin").read_bytes() == icechunk_read(storage, first)
        fd = os.open(m.path / "a.bin", os.O_RDWR)
        try:
            os.pwrite(fd, np.array([-7, -8], "<i4").tobytes(), 4 * 31)  # a[1, 1], a[1, 2]
            os.fsync(fd)
        finally:
            os.close(fd)
        said = subprocess.run([ZARRFS, "commit", m.path, "-m", "through Azure"], capture_output=True, text=True,
                              check=True)
        assert AZURE_KEY not in m.log()
    head = icechunk.Repository.open(storage).lookup_snapshot(said.stdout.strip())
    assert (head.message, head.parent_id) == ("through Azure", second)
    expected = np.arange(1200, dtype="<i4").reshape(40, 30) * 2
    expected[1, 1:3] = [-7, -8]
    assert icechunk_read(storage, head.id) == expected.tobytes()


@needs_python312
def test_a_repository_on_gcs_mounts_with_a_service_account_file(fake_gcs, tmp_path):
    """Read only: fake-gcs-server takes no XML API PUT (object_store's, so icechunk's, way to
    write to GCS), so icechunk-python cannot write a repository there: it is written on the disk
    and uploaded through the JSON API (as tests/stores/test_gcs.py does)."""
    bucket = f"b{uuid.uuid4().hex[:12]}"
    fake_gcs.make_bucket(bucket)
    repo, first = small_icechunk_repository(tmp_path / "local")
    second = doubled(repo)
    fake_gcs.upload(bucket, tmp_path / "local", "repo")
    storage = icechunk.gcs_storage(bucket=bucket, prefix="repo", anonymous=True,
                                   config={"base_url": fake_gcs.endpoint, "allow_http": "true"})
    account = fake_gcs.service_account(tmp_path)
    options = fake_gcs.mount_options("icechunk", "ro", f"credentials_file={account}")
    with mounted(f"gs://{bucket}/repo", tmp_path, *options, env=clean_environment()) as m:
        assert (m.path / "a.bin").read_bytes() == icechunk_read(storage, second)
        assert (m.path / f"@{first}" / "a.bin").read_bytes() == icechunk_read(storage, first)
        assert {f"@{first}", f"@{second}", "@branch.main"} <= set((m.path / "@versions").read_text().split())


@needs_python312
def test_a_repository_over_http_mounts_read_only(tmp_path):
    from servers.nginx import Nginx

    repo, first = small_icechunk_repository(tmp_path / "www" / "repo")
    second = doubled(repo)
    server = Nginx(tmp_path / "nginx", tmp_path / "www")
    server.start()
    try:
        storage = icechunk.http_storage(f"{server.url}/repo", {"allow_http": "true"})
        with mounted(f"{server.url}/repo", tmp_path, "icechunk", "ro", env=clean_environment()) as m:
            assert (m.path / "a.bin").read_bytes() == icechunk_read(storage, second)
            assert (m.path / f"@{first}" / "a.bin").read_bytes() == icechunk_read(storage, first)
        line = failed_start(f"{server.url}/repo", ["icechunk"], clean_environment(), tmp_path)
        assert "read-only: add -o ro" in line
    finally:
        server.stop()


@needs_python312
def test_an_anonymous_gcs_repository_mounted_writable_is_one_line(tmp_path):
    """icechunk's GCS client with -o anon reads, but asks the metadata server for a token
    before a write: the mount says so at start, not at the first fsync. Nothing is asked of the
    endpoint (none answers there)."""
    line = failed_start("gs://bucket/repo", ["icechunk", "anon", "endpoint=http://127.0.0.1:9"], clean_environment(),
                        tmp_path)
    assert "gs://bucket/repo" in line and "-o anon" in line and "add -o ro" in line


def test_a_library_error_quoted_in_a_line_leaves_out_the_urls_queries():
    """A SAS token or a presigned URL's signature is a URL's query: never in a log line."""
    said = first_line(RuntimeError("Error performing GET http://127.0.0.1:1/acct/c/key?sv=2023&sig=SECRET in 1 ms "
                                   "- Server returned 403\nmore"))
    assert "SECRET" not in said and "sig=" not in said
    assert said.startswith("Error performing GET http://127.0.0.1:1/acct/c/key?") and said.endswith("403")


def upload(seaweed, prefix: str, name: str, data: bytes) -> None:
    import obstore

    obstore.put(seaweed.store(prefix), name, data)


@needs_python312
def test_virtual_chunks_in_an_s3_container_are_read_as_netcdf4_reads_them_and_no_others(seaweed, tmp_path):
    """A container on the mount's own endpoint is read with the mount's S3 credentials (the
    repository's writer had its own); one whose endpoint the repository names otherwise is not
    (the mount's keys go nowhere the repository chooses), nor a chunk in no container at all:
    EIO, and one line naming the chunk."""
    import h5py
    import netCDF4

    from servers.seaweed import BUCKET, USERS, unique_prefix

    prefix = unique_prefix("icechunk-virtual")
    key, secret, _ = USERS["admin"]
    ours, elsewhere = f"s3://{BUCKET}/{prefix}/netcdf/", f"s3://{BUCKET}/{prefix}/elsewhere/"
    stray = f"s3://{BUCKET}/{prefix}/stray/"
    config = icechunk.RepositoryConfig.default()
    for container, endpoint in ((ours, seaweed.endpoint), (elsewhere, seaweed.endpoint.replace("127.0.0.1",
                                                                                                "localhost"))):
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(container, icechunk.s3_store(
            region="us-east-1", endpoint_url=endpoint, allow_http=True, s3_compatible=True, force_path_style=True)))
    storage = icechunk.s3_storage(bucket=BUCKET, prefix=f"{prefix}/repo", endpoint_url=seaweed.endpoint,
                                  allow_http=True, force_path_style=True, region="us-east-1", access_key_id=key,
                                  secret_access_key=secret)
    writers = icechunk.s3_credentials(access_key_id=key, secret_access_key=secret)
    repo = icechunk.Repository.create(storage, config=config,
                                      authorize_virtual_chunk_access=icechunk.containers_credentials(
                                          {ours: writers, elsewhere: writers}))
    values = np.random.default_rng(7).normal(280, 10, (12, 20)).astype("<f4")
    with netCDF4.Dataset(tmp_path / "day1.nc", "w", format="NETCDF4") as nc:
        nc.createDimension("y", 12)
        nc.createDimension("x", 20)
        nc.createVariable("temperature", "<f4", ("y", "x"), contiguous=True)[:] = values
    with h5py.File(tmp_path / "day1.nc", "r") as h5:
        start = h5["temperature"].id.get_offset()
    for where in ("netcdf", "elsewhere", "stray"):  # the same file in each: only the containment differs
        upload(seaweed, prefix, f"{where}/day1.nc", (tmp_path / "day1.nc").read_bytes())
    session = repo.writable_session("main")
    root = zarr.group(session.store)
    rows = 4  # a chunk of 4 whole rows is one contiguous byte range of the variable
    for name, container in (("temperature", ours), ("elsewhere", elsewhere), ("stray", stray)):
        root.create_array(name, shape=(12, 20), chunks=(rows, 20), dtype="<f4", fill_value=0, compressors=None)
        for chunk in range(3):
            session.store.set_virtual_ref(f"{name}/c/{chunk}/0", f"{container}day1.nc",
                                          offset=start + chunk * rows * 20 * 4, length=rows * 20 * 4,
                                          validate_container=container != stray)
    session.commit("netCDF on S3, virtual")
    with mounted(seaweed.url(f"{prefix}/repo"), tmp_path, *seaweed.mount_options("icechunk", "ro"),
                 env=seaweed.env()) as m:
        with netCDF4.Dataset(tmp_path / "day1.nc") as nc:
            expected = np.ascontiguousarray(nc["temperature"][:].filled(), dtype="<f4")
        assert (m.path / "temperature.bin").read_bytes() == expected.tobytes()
        for name in ("elsewhere", "stray"):
            with pytest.raises(OSError) as refused:
                (m.path / f"{name}.bin").read_bytes()
            assert refused.value.errno == errno.EIO
        log = m.settled_log()
        said = [line for line in log.splitlines() if elsewhere in line and "are not read" in line]
        assert len(said) == 1 and "is not the mount's" in said[0], log
        for name in ("elsewhere", "stray"):
            refusals = [line for line in log.splitlines() if f"read_buf /{name}.bin" in line]
            assert refusals and all(f"{name}/c/0" in line for line in refusals), log  # the kernel may ask twice
        assert secret not in log
