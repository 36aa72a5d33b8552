"""az:// end to end through real mounts against Azurite (Microsoft's Azure Blob emulator): reads
byte-exact, writes zarr-python reads back, two mounts writing one shard merged through ETag
preconditions (If-Match), hierarchy edits, and the ways of giving credentials."""

import base64
import os
import subprocess
import uuid

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec
from zarr.storage import ObjectStore

from helpers import delete_array
from mounting import failed_start, mounted
from servers.emulators import AZURE_ACCOUNT, AZURE_KEY


@pytest.fixture
def container(azurite):
    name = f"c{uuid.uuid4().hex[:12]}"
    azurite.make_container(name)
    return name


def environment(**more) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_"))}
    return {**env, **more}


def key_env() -> dict:
    return environment(AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=AZURE_KEY)


def mount_az(azurite, container, tmp_path, *options, name="mnt", env=None):
    return mounted(f"az://{container}/data", tmp_path, *azurite.mount_options(*options), name=name,
                   env=env or key_env())


def zarr_store(azurite, container, prefix="data"):
    return ObjectStore(azurite.store(container, prefix))


def test_reads_what_zarr_python_wrote_byte_exact(azurite, container, tmp_path):
    root = zarr.open_group(zarr_store(azurite, container), mode="w")
    values = np.random.default_rng(5).normal(size=(48, 40)).astype("<f4")
    root.create_group("g").create_array("s", shape=values.shape, chunks=(8, 8), shards=(16, 40), dtype="f4",
                                        compressors=[ZstdCodec(level=1)])[...] = values
    root.create_array("p", shape=(10,), chunks=(4,), dtype="i8")[...] = np.arange(10)
    with mount_az(azurite, container, tmp_path, "ro") as m:
        assert np.array_equal(np.frombuffer((m / "g/s.bin").read_bytes(), "<f4").reshape(values.shape), values)
        assert np.frombuffer((m / "p.bin").read_bytes(), "<i8").tolist() == list(range(10))
        assert "s.bin" in os.listdir(m / "g")


def test_zarr_python_reads_what_the_mount_wrote(azurite, container, tmp_path):
    root = zarr.open_group(zarr_store(azurite, container), mode="w")
    root.create_array("a", shape=(100,), chunks=(30,), dtype="f8", fill_value=-1.0)
    with mount_az(azurite, container, tmp_path) as m:
        with open(m / "a.bin", "r+b") as f:
            f.seek(8 * 40)
            f.write(np.array([1.5, 2.5], "<f8").tobytes())
    expected = np.full(100, -1.0)
    expected[40:42] = [1.5, 2.5]
    assert np.array_equal(zarr.open_array(zarr_store(azurite, container, "data/a"), mode="r")[...], expected)


def test_two_mounts_writing_halves_of_one_shard_both_land(azurite, container, tmp_path):
    """The second PUT's If-Match fails (the first mount changed the blob), and it merges."""
    root = zarr.open_group(zarr_store(azurite, container), mode="w")
    root.create_array("a", shape=(32, 32), chunks=(16, 32), shards=(32, 32), dtype="i4")[...] = 5
    half = 16 * 32 * 4
    with mount_az(azurite, container, tmp_path, name="m1") as one, \
            mount_az(azurite, container, tmp_path, name="m2") as two:
        with open(one / "a.bin", "r+b") as f1, open(two / "a.bin", "r+b") as f2:
            assert (np.frombuffer(f2.read(), "<i4") == 5).all()
            f1.write(np.full(16 * 32, 1, "<i4").tobytes())
            f1.flush()
            os.fsync(f1.fileno())
            f2.seek(half)
            f2.write(np.full(16 * 32, 2, "<i4").tobytes())
            f2.flush()
            os.fsync(f2.fileno())
    stored = zarr.open_array(zarr_store(azurite, container, "data/a"), mode="r")[...]
    assert (stored[:16] == 1).all() and (stored[16:] == 2).all()


def test_a_stale_etag_is_refused_by_the_server_and_merged(azurite, container, tmp_path):
    """Both mounts read the one chunk (version 1) for their partial writes; the first stores
    version 2; the second's PUT, If-Match version 1, is refused (412), and it merges."""
    root = zarr.open_group(zarr_store(azurite, container), mode="w")
    root.create_array("a", shape=(64,), chunks=(64,), dtype="i4")[...] = 5
    with mount_az(azurite, container, tmp_path, name="m1") as one, \
            mount_az(azurite, container, tmp_path, name="m2") as two:
        with open(one / "a.bin", "r+b") as f1, open(two / "a.bin", "r+b") as f2:
            f2.seek(4 * 32)
            f2.write(np.full(32, 2, "<i4").tobytes())  # reads the chunk: version 1
            f2.flush()
            f1.write(np.full(32, 1, "<i4").tobytes())
            f1.flush()
            os.fsync(f1.fileno())  # version 2
            os.fsync(f2.fileno())  # If-Match version 1: refused, merged, written again
        assert "changed by another writer meanwhile" in two.log(), two.log()
    stored = zarr.open_array(zarr_store(azurite, container, "data/a"), mode="r")[...]
    assert stored.tolist() == [1] * 32 + [2] * 32


def test_hierarchy_edits_through_the_mount(azurite, container, tmp_path):
    zarr.open_group(zarr_store(azurite, container), mode="w").create_array("a", shape=(4,), dtype="u1")
    frames = np.arange(2 * 30 * 20, dtype="<u2").reshape(2, 30, 20)
    np.save(tmp_path / "frames.npy", frames)
    with mount_az(azurite, container, tmp_path, "metadata_ttl=0") as m:
        (m / "raw").mkdir()
        subprocess.run(["cp", str(tmp_path / "frames.npy"), str(m / "raw")], check=True)
        subprocess.run(["mv", str(m / "raw/frames.bin"), str(m / "raw/stack.bin")], check=True)
        stack = zarr.open_array(zarr_store(azurite, container, "data/raw/stack"), mode="r")
        assert np.array_equal(stack[...], frames)
        delete_array(m / "raw", "stack")  # rm stack.*: the array goes with its last file
        os.rmdir(m / "raw")
        assert "raw" not in os.listdir(m.path)
    import obstore
    keys = sorted(meta["path"] for page in obstore.list(azurite.store(container, "data")) for meta in page)
    assert keys == ["a/zarr.json", "zarr.json"]


def test_credentials_from_a_file(azurite, container, tmp_path):
    zarr.open_group(zarr_store(azurite, container), mode="w").create_array(
        "a", shape=(3,), dtype="u1")[...] = 4
    credentials = azurite.credentials_file(tmp_path)
    with mount_az(azurite, container, tmp_path, "ro", f"credentials_file={credentials}", env=environment()) as m:
        assert np.frombuffer((m / "a.bin").read_bytes(), "u1").tolist() == [4, 4, 4]


def start(azurite, container, tmp_path, options, env):
    return failed_start(f"az://{container}/data", azurite.mount_options(*options), env, tmp_path)


def test_anonymous_requests_to_a_private_container_are_one_line(azurite, container, tmp_path):
    zarr.open_group(zarr_store(azurite, container), mode="w")
    line = start(azurite, container, tmp_path, ["anon"], environment(AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT))
    assert "-o anon sends unsigned requests" in line, line


def test_a_wrong_account_key_names_the_code_and_where_it_came_from(azurite, container, tmp_path):
    zarr.open_group(zarr_store(azurite, container), mode="w")
    wrong_key = base64.b64encode(b"not the account's key, 64 bytes long as Azure's keys are........").decode()
    wrong = environment(AZURE_STORAGE_ACCOUNT_NAME=AZURE_ACCOUNT, AZURE_STORAGE_ACCOUNT_KEY=wrong_key)
    line = start(azurite, container, tmp_path, [], wrong)
    assert "AuthorizationFailure" in line or "AuthenticationFailed" in line, line
    assert "credentials from the environment (AZURE_STORAGE_ACCOUNT_KEY)" in line
    assert wrong_key not in line


def test_a_missing_container_is_named(azurite, tmp_path):
    line = start(azurite, "nosuchcontainer", tmp_path, [], key_env())
    assert "does not exist" in line and "ContainerNotFound" in line, line
