"""Nobody else writes with the owner's credentials. A writable mount with `allow_other` has the
kernel check every other user's request against the modes shown (`default_permissions`, always
added then), so a user the modes refuse never reaches the daemon, which writes to the store with
the owner's credentials; `uid=`, `gid=` and `umask=` say whom the files show as belonging to and
what they allow. A real second user (made here, always removed) does each operation against a
real mount, in a process of its own with its uid and gid."""

import json
import os
import stat
import subprocess
from pathlib import Path

import numpy as np
import obstore
import pytest
import zarr

from helpers import another_user, reachable_directory
from mounting import ZARRFS, mounted
from servers.seaweed import unique_prefix

# Each operation a user may try on the mount: (name, code run with `m`, the mount, at hand).
# The probe prints {name: "ok", the errno's name, or what access(2) said}.
OPERATIONS = {
    "read a.bin": "open(m + '/a.bin', 'rb').read()",
    "pwrite and fsync a.bin": "fd = os.open(m + '/a.bin', os.O_WRONLY); os.pwrite(fd, b'\\x07' * 8, 0); os.fsync(fd); "
                              "os.close(fd)",
    "open a.bin with O_TRUNC": "os.close(os.open(m + '/a.bin', os.O_WRONLY | os.O_TRUNC))",
    "write the sidecar a.json": "open(m + '/a.json', 'r+').write(open(m + '/a.json').read())",
    "set user.zarr.attr.k on a.bin": "os.setxattr(m + '/a.bin', 'user.zarr.attr.k', b'1')",
    "set user.zarr.attr.k on g": "os.setxattr(m + '/g', 'user.zarr.attr.k', b'1')",
    "unlink a.bin": "os.unlink(m + '/a.bin')",
    "rename the array a.bin": "os.rename(m + '/a.bin', m + '/b.bin')",
    "rename the group g": "os.rename(m + '/g', m + '/h')",
    "mkdir new": "os.mkdir(m + '/new')",
    "create new.npy": "open(m + '/new.npy', 'xb').close()",
    "access(W_OK) of a.bin": "said = 'writable' if os.access(m + '/a.bin', os.W_OK) else 'not writable'",
}
PROBE = """
import errno, json, os, sys
m, names, code = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {}
for name in names:
    said = 'ok'
    try:
        exec(code[name])
    except OSError as e:
        said = errno.errorcode.get(e.errno, str(e.errno))
    out[name] = said
print(json.dumps(out))
"""
WRITES = [name for name in OPERATIONS if name != "read a.bin" and not name.startswith("access")]


@pytest.fixture
def shared():
    with reachable_directory("zarrfs-other-users-") as path:
        yield path


@pytest.fixture
def other_user(shared):
    with another_user(shared, "zfs") as user:
        yield user


def as_user(user, mount, names) -> dict[str, str]:
    """What each operation in `names` gave when `user` did it (uid, gid, no other groups)."""
    result = subprocess.run(["/usr/bin/python3", "-c", PROBE, str(mount), json.dumps(names), json.dumps(OPERATIONS)],
                            user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True, text=True,
                            timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def make_store(root: Path) -> Path:
    make_store_in(zarr.open_group(str(root), mode="w", zarr_format=3, attributes={"title": "t"}))
    return root


def make_store_in(group) -> None:
    group.create_array("a", shape=(16,), chunks=(8,), dtype="uint8", compressors=None)[...] = np.arange(16)
    group.create_group("g")


def stored(root: Path) -> dict[str, bytes]:
    """Every file of the store and its bytes: what a write that reached it would change."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_other_users_are_refused_every_write_by_the_kernel_and_the_owner_is_not(tmp_path, shared, other_user):
    root = make_store(tmp_path / "store")
    before = stored(root)
    with mounted(root, shared, "allow_other") as m:
        said = as_user(other_user, m.path, list(OPERATIONS))
        assert said == {"read a.bin": "ok", "access(W_OK) of a.bin": "not writable",
                        **{name: "EACCES" for name in WRITES}}, said
        assert stored(root) == before  # nothing reached the store
        st = os.stat(m / "a.bin")  # the modes say so: the store's owner may write, others read
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644)
        assert stat.S_IMODE(os.stat(m.path).st_mode) == 0o755
        with open(m / "a.bin", "r+b") as f:  # the owner (root here) still writes
            f.write(b"\x09" * 8)
        os.mkdir(m / "mine")
    assert zarr.open_array(str(root / "a"))[:8].tolist() == [9] * 8
    assert (root / "mine" / "zarr.json").exists()


def test_on_an_object_store_nothing_of_theirs_reaches_the_bucket(seaweed, shared, other_user):
    """The case that matters most: the daemon holds the bucket's credentials."""
    prefix = unique_prefix("other-users")
    make_store_in(zarr.open_group(seaweed.zarr_store(prefix), mode="w", zarr_format=3, attributes={"title": "t"}))
    bucket = seaweed.store(prefix)

    def objects() -> dict[str, str]:
        return {meta["path"]: meta["e_tag"] for meta in obstore.list(bucket).collect()}

    before = objects()
    with mounted(seaweed.url(prefix), shared, *seaweed.mount_options("allow_other"), env=seaweed.env()) as m:
        said = as_user(other_user, m.path, list(OPERATIONS))
        assert said == {"read a.bin": "ok", "access(W_OK) of a.bin": "not writable",
                        **{name: "EACCES" for name in WRITES}}, said
        assert objects() == before
        with open(m / "a.bin", "r+b") as f:  # the owner (the daemon's user, root here) still writes
            f.write(b"\x09" * 8)
    assert zarr.open_array(seaweed.zarr_store(prefix), path="a")[:8].tolist() == [9] * 8


def test_uid_and_gid_make_another_user_the_owner(tmp_path, shared, other_user):
    root = make_store(tmp_path / "store")
    uid, gid = other_user.pw_uid, other_user.pw_gid
    with mounted(root, shared, "allow_other", f"uid={uid}", f"gid={gid}") as m:
        for path in (m.path, m / "a.bin", m / "a.json", m / "zarr.json"):
            assert (os.stat(path).st_uid, os.stat(path).st_gid) == (uid, gid)
        said = as_user(other_user, m.path, ["pwrite and fsync a.bin", "set user.zarr.attr.k on a.bin", "mkdir new",
                                            "access(W_OK) of a.bin"])
        assert said == {"pwrite and fsync a.bin": "ok", "set user.zarr.attr.k on a.bin": "ok", "mkdir new": "ok",
                        "access(W_OK) of a.bin": "writable"}, said
    assert zarr.open_array(str(root / "a"))[:8].tolist() == [7] * 8
    assert zarr.open_array(str(root / "a")).attrs["k"] == 1 and (root / "new" / "zarr.json").exists()


def test_umask_takes_bits_from_every_mode_shown(tmp_path, shared, other_user):
    root = make_store(tmp_path / "store")
    with mounted(root, shared, "allow_other", "umask=077") as m:
        modes = {name: stat.S_IMODE(os.stat(m / name).st_mode) for name in ("", "g", "a.bin", "a.json", "a.bin.hdr")}
        assert modes == {"": 0o700, "g": 0o700, "a.bin": 0o600, "a.json": 0o600, "a.bin.hdr": 0o400}, modes
        assert as_user(other_user, m.path, ["read a.bin"]) == {"read a.bin": "EACCES"}
    with mounted(root, shared, "allow_other", "umask=027", "ro", name="ro") as m:
        modes = {name: stat.S_IMODE(os.stat(m / name).st_mode) for name in ("", "a.bin", "a.json")}
        assert modes == {"": 0o550, "a.bin": 0o440, "a.json": 0o440}, modes


@pytest.mark.parametrize("word", ["uid=alice", "gid=-1", "umask=999", "umask=1000"])
def test_ownership_options_that_do_not_parse_are_one_line(tmp_path, word):
    root = make_store(tmp_path / "store")
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, str(root), str(tmp_path / "mnt"), "-f",
                             "-o", word], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith(f"zarrfs: {word.partition('=')[0]}=")
    assert len(result.stderr.splitlines()) == 1, result.stderr
