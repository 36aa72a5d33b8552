"""The command explains itself: --version, --help with every -o option and its default, and -d
logging one line per FUSE request and per chunk decode or store read, with no noise."""

import os
import re
import subprocess

import numpy as np
import zarr

from mounting import ZARRFS, mounted
from zarrfs.cli.command import parse_options


def run(*args):
    return subprocess.run([ZARRFS, *map(str, args)], capture_output=True, text=True, timeout=30)


def test_version():
    result = run("--version")
    assert result.returncode == 0 and re.fullmatch(r"zarrfs \d+\.\d+\.\d+\n", result.stdout)


def test_help_lists_every_option_with_its_default():
    out = run("--help").stdout
    defaults = parse_options([])[0]
    for option, default in [("ro", "off"), ("cache_size=SIZE", "512M"), ("dirty_size=SIZE", "256M"), ("decode_ahead=SIZE", "16M"),
                            ("views=LIST", ",".join(defaults.views)), ("header_cache_size=SIZE", "32M"),
                            ("recovery_dir=DIR", defaults.recovery_dir),
                            ("log_file=PATH", "syslog; without /dev/log /var/log/zarrfs/zarrfs.log"),
                            ("symlinks=follow", "contain"), ("debug", "off"), ("previews", "off"),
                            ("noxattr", "off"), ("timeout=SECONDS", "30"), ("metadata_ttl=SECONDS", "60"),
                            ("anon", "off"), ("prefetch_size=SIZE", "64M"), ("umask=OCTAL", "022"),
                            ("allow_other", "off")]:
        assert re.search(rf"^  {re.escape(option)}  \[{re.escape(default)}\]$", out, re.M), option
    for word in ("allow_other", "auto_unmount", "fsname=NAME", "nofail", "x-*"):
        assert word in out
    # every option the help names is one parse_options accepts
    for word in ("ro", "cache_size=1G", "dirty_size=1M", "decode_ahead=0", "decode_ahead=4M", "views=none", "header_cache_size=1M",
                 "recovery_dir=/tmp/r", "log_file=/tmp/l", "symlinks=follow", "debug", "previews", "noxattr", "endpoint=http://h:1", "region=eu-west-1",
                 "anon", "timeout=5", "metadata_ttl=0", "credentials_file=/c", "prefetch_size=0", "prefetch_size=128M", "allow_other", "auto_unmount",
                 "fsname=x", "nofail", "x-a=b", "uid=1000", "gid=1000", "umask=077"):
        parse_options([word])
    assert "uid=N, gid=N" in out
    # other users' requests are checked by the kernel: the daemon writes with the owner's credentials
    assert parse_options(["allow_other"])[1] == {"allow_other": True, "default_permissions": True}
    for word in ("uid=1000", "gid=1000", "umask=077"):  # the modes shown are the ones that hold
        assert parse_options([word])[1] == {"default_permissions": True}
    assert parse_options(["umask=022"])[1] == {}  # the default: nothing changes


def test_debug_logs_each_request_and_chunk_and_nothing_of_the_bindings_set_up(tmp_path):
    store = tmp_path / "store"
    array = zarr.create_array(str(store), shape=(256, 256), chunks=(64, 64), dtype="float32")
    array[...] = np.arange(65536, dtype="float32").reshape(256, 256)
    with mounted(store, tmp_path, "debug") as m:
        fd = os.open(m / "store.bin", os.O_RDONLY)
        try:
            os.pread(fd, 4096, 8192)
        finally:
            os.close(fd)
    log = m.log()
    assert re.search(r"DEBUG zarrfs\.fuse\.tracing: read /store\.bin offset=\d+ size=\d+ -> \d+ \(\d+\.\d+ ms\)$", log, re.M)
    assert re.search(r"DEBUG zarrfs\.fuse\.tracing: open /store\.bin -> \d+ \(", log, re.M)
    assert re.search(r"DEBUG zarrfs\.engine\.chunk_sources: store read c/0/0 whole -> \d+ bytes$", log, re.M)
    assert re.search(r"DEBUG zarrfs\.engine\.array: decoded / chunk c/0/0 \(\d+ stored bytes.*\) in \d+\.\d+ ms$", log, re.M)
    assert "libFUSE callback" not in log
    assert "Warning" not in log  # no dependency warns on start-up


def test_no_dependency_warns(tmp_path):
    """numcodecs warns when it falls back to the crc32c package: zarrfs needs only google-crc32c."""
    result = subprocess.run([os.path.join(os.path.dirname(ZARRFS), "python"), "-W", "error", "-c",
                             "import zarrfs.cli.command, numcodecs.checksum32"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    import importlib.metadata
    requirements = importlib.metadata.requires("zarrfs")
    assert not any(re.match(r"crc32c\b", r) for r in requirements)


def test_zarrfs_commit_without_a_message_is_told_so_by_the_commit_parser(tmp_path):
    """`zarrfs commit MOUNT` is the commit command whatever follows (the mount's parser said
    'commit' is no Zarr hierarchy); beside a directory ./commit it is a mount of it, unless a
    message is given."""
    def said(*words):
        return subprocess.run([ZARRFS, "commit", str(tmp_path / "mnt"), *words], capture_output=True, text=True,
                              cwd=tmp_path, timeout=30)
    answer = said()
    assert answer.returncode == 2 and "zarrfs commit" in answer.stderr and "-m/--message" in answer.stderr
    (tmp_path / "commit").mkdir()
    answer = said()
    assert answer.returncode != 0 and "mount point: no such directory" in answer.stderr
    answer = said("-m", "a message")
    assert answer.returncode != 0 and answer.stderr.startswith("zarrfs commit: ")
