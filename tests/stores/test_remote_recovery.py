"""An object store that goes away while a mount holds written data: at unmount the data is saved
for recovery, and once the server is back `zarrfs-recover DIR -o endpoint=...` writes it into
the store, merged with what another writer stored meanwhile. SeaweedFS, reached by the mount
through a proxy of the test's own that is closed to make the outage."""

import json
import os
import subprocess

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from mounting import RECOVER, mounted, reap, unmount
from servers.delay_proxy import DelayProxy
from servers.seaweed import USERS, unique_prefix


def test_what_an_outage_kept_from_the_store_is_replayed_and_merged_with_another_writers(seaweed, tmp_path):
    prefix = unique_prefix("recover")
    z = zarr.create_array(seaweed.zarr_store(prefix), shape=(64, 64), chunks=(8, 8), shards=(32, 32), dtype="<u2",
                          fill_value=0, compressors=[ZstdCodec(level=1)])
    original = np.arange(64 * 64, dtype="<u2").reshape(64, 64)
    z[...] = original
    recovery = tmp_path / "recovery"
    expected = original.copy()
    with DelayProxy(("127.0.0.1", seaweed.ports["s3"]), 0.0) as proxy:
        with mounted(seaweed.url(prefix), tmp_path, f"endpoint={proxy.endpoint}", "timeout=2",
                     f"recovery_dir={recovery}", env=seaweed.env()) as m:
            fd = os.open(m / f"{prefix}.bin", os.O_RDWR)
            os.pwrite(fd, np.full(16, 0xABAB, "<u2").tobytes(), (3 * 64 + 4) * 2)  # parts of 3 inner chunks
            expected[3, 4:20] = 0xABAB
            os.pwrite(fd, np.full(8 * 64, 0xCDCD, "<u2").tobytes(), 40 * 64 * 2)  # whole inner chunks
            expected[40:48] = 0xCDCD
            proxy.__exit__(None, None, None)  # the server is out of the mount's reach
            # meanwhile another writer changes elements of the same inner chunks, which the mount read before
            z[3, 0:4] = 7
            z[5, 4:20] = 9
            expected[3, 0:4], expected[5, 4:20] = 7, 9
            try:
                os.close(fd)  # the write-back fails...
            except OSError:
                pass
            unmount(m.path)  # ...and again at unmount
            reap(m.process)
            assert m.process.returncode != 0
            log = m.log()
    [saved] = sorted(recovery.iterdir())
    assert f"zarrfs-recover {saved} -o OPTIONS" in log, log
    manifest = (saved / "recovery.json").read_text()
    assert json.loads(manifest)["store"] == seaweed.url(prefix)
    assert not any(secret in manifest for _, secret, _ in USERS.values())

    # the server reached again: the replay takes the mount's options and environment
    result = subprocess.run([*RECOVER, str(saved), "-o", f"endpoint={seaweed.endpoint},cache_size=64M"],
                            env=seaweed.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.asarray(z[...]), expected)
    assert not saved.exists()


def test_a_replay_the_server_refuses_is_one_line_and_keeps_the_data(seaweed, tmp_path):
    """A replay as a user who may only read: one line naming the directory, no traceback, and
    the directory kept for the next try."""
    import obstore

    from zarrfs.engine import recovery as saving

    prefix = unique_prefix("recover-refused")
    zarr.create_array(seaweed.zarr_store(prefix), shape=(8,), chunks=(4,), dtype="u1", fill_value=0)
    document = json.loads(bytes(obstore.get(seaweed.store(prefix), "zarr.json").bytes()))
    saved = saving.save([str(tmp_path / "recovery")], seaweed.url(prefix), "", document,
                        [((slice(0, 4),), np.ones(4, "u1"), None)])
    result = subprocess.run([*RECOVER, saved, "-o", f"endpoint={seaweed.endpoint}"], env=seaweed.env("reader"),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"zarrfs-recover: {saved}: ") and "Traceback" not in result.stderr
    assert os.path.isdir(saved)
    assert not np.asarray(zarr.open_array(seaweed.zarr_store(prefix))[...]).any()
