"""What extended attributes cost a listing. `ls -l` asks every file for its SELinux label and
its POSIX ACL; zarrfs has neither and says so (ENOTSUP), so ls asks once per mount instead of
twice per file, and tools that keep ACLs, labels and attributes (cp -a, rsync -AX, tar) copy
without a complaint. -o noxattr turns attributes off altogether: the kernel then stops asking."""

import errno
import filecmp
import os
import re
import subprocess

import numpy as np
import pytest
import zarr

from mounting import mounted

ARRAYS = 12


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("xattr") / "store"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for i in range(ARRAYS):
        array = group.create_array(f"a{i:02d}", shape=(16, 16), chunks=(8, 8), dtype="int16")
        array[...] = np.arange(256, dtype="int16").reshape(16, 16) + i
    return root


def requests(log: str, op: str) -> list[str]:
    """The results of the daemon's answers to `op` requests, from its -d log."""
    return re.findall(rf"zarrfs\.fuse\.tracing: {op} \S+ -> (\S+) \(", log)


def errno_of(call) -> int:
    with pytest.raises(OSError) as e:
        call()
    return e.value.errno


def test_ls_asks_for_labels_and_acls_once_per_mount_not_per_file(store, tmp_path):
    with mounted(store, tmp_path, "ro", "debug") as m:
        bin_path = m / "a00.bin"
        assert errno_of(lambda: os.getxattr(bin_path, "security.selinux")) == errno.ENOTSUP
        assert errno_of(lambda: os.getxattr(bin_path, "system.posix_acl_access")) == errno.ENOTSUP
        assert os.getxattr(bin_path, "user.zarr.shape") == b"[16, 16]"
        assert errno_of(lambda: os.getxattr(bin_path, "user.other")) == errno.ENODATA  # user.* is supported
        before = len(requests(m.settled_log(), "getxattr"))
        for _ in range(2):
            listed = subprocess.run(["ls", "-lR", str(m.path)], capture_output=True, text=True, check=True).stdout
        files = [line for line in listed.splitlines() if line.startswith("-r")]
        assert len(files) > 6 * ARRAYS  # .bin, .json and the header views
    asked = requests(m.log(), "getxattr")[before:]
    assert len(asked) <= 2 * 2  # each ls: the label and the ACL of the first file, then no more
    assert set(asked) <= {"-95"}  # ENOTSUP


@pytest.mark.parametrize("copy", [
    ["cp", "-a", "{m}", "{out}/copy"],
    ["rsync", "-aAX", "{m}/", "{out}/copy/"],
    ["sh", "-c", "tar --acls --xattrs --selinux -cf {out}/t.tar -C {m} . && mkdir {out}/copy && tar -xf {out}/t.tar -C {out}/copy"],
    ["sh", "-c", "bsdtar --acls --xattrs -cf {out}/t.tar -C {m} . && mkdir {out}/copy && bsdtar -xf {out}/t.tar -C {out}/copy"],
], ids=["cp -a", "rsync -aAX", "tar --acls --xattrs --selinux", "bsdtar --acls --xattrs"])
def test_copies_that_keep_acls_labels_and_attributes_complain_of_nothing(store, tmp_path, copy):
    out = tmp_path / "out"
    out.mkdir()
    with mounted(store, tmp_path, "ro") as m:
        done = subprocess.run([word.format(m=m.path, out=out) for word in copy], capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        for i in (0, ARRAYS - 1):
            assert filecmp.cmp(m / f"a{i:02d}.bin", out / "copy" / f"a{i:02d}.bin", shallow=False)


def test_noxattr_shows_no_attributes_and_the_kernel_stops_asking(store, tmp_path):
    with mounted(store, tmp_path, "ro", "noxattr", "debug") as m:
        names = os.listdir(m.path)
        for _ in range(2):
            for name in names:
                assert errno_of(lambda name=name: os.listxattr(m / name)) == errno.ENOTSUP
                assert errno_of(lambda name=name: os.getxattr(m / name, "user.zarr.shape")) == errno.ENOTSUP
        subprocess.run(["ls", "-lR", str(m.path)], capture_output=True, check=True)
        assert (m / "a00.bin").read_bytes() == np.arange(256, dtype="<i2").reshape(16, 16).tobytes()
    log = m.log()
    assert requests(log, "listxattr") == ["-38"] and requests(log, "getxattr") == ["-38"]  # ENOSYS, once each
