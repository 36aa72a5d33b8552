"""The SeaweedFS server the object-store tests start (tests/servers/seaweed.py) keeps what it
writes in its own directory, as every test must."""

import os
from pathlib import Path

import obstore

from leftovers import descriptors


def held_paths(pid: int) -> list[str]:
    """The paths of the files process `pid` holds open (not its sockets, pipes, devices and
    the kernel's own files)."""
    return [path for path in descriptors(pid) if path.startswith("/") and not path.startswith(("/dev/", "/sys/", "/proc/"))]


def test_seaweed_writes_nothing_outside_its_directory(seaweed):
    """`weed mini -dir=D` kept its volumes (.dat, .idx, a LevelDB .ldb each) in a directory of
    its own making in /tmp, its logs there too (weed.INFO, ...), and made its local sockets
    /tmp/seaweedfs-s3-PORT.sock and /tmp/seaweedfs-filer-PORT.sock: a few hundred KiB and four
    sockets left in /tmp each session, 900 directories on this machine in a day."""
    store = seaweed.store("test_seaweed_writes_nothing_outside_its_directory")
    for collection in ("a", "b"):  # each a volume of its own
        obstore.put(store, f"{collection}/value", b"x" * 1000)
    directory = str(Path(seaweed.directory).resolve())
    assert [path for path in held_paths(seaweed.process.pid) if not path.startswith(directory + "/")] == []
    sockets = [f"/tmp/seaweedfs-{service}-{port}.sock" for service in ("s3", "filer")
               for port in (seaweed.ports[service], seaweed.ports[f"{service}.grpc"])]
    assert [path for path in sockets if os.path.exists(path)] == []
