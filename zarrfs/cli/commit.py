"""`zarrfs commit MOUNT -m MESSAGE`: commit what was written to a mounted Icechunk branch, as
`setfattr -n user.icechunk.commit -v MESSAGE MOUNT` does (fs/versions.py); prints the new
snapshot's id. The daemon's log says why a commit was refused (a conflict it could not rebase)."""

import argparse
import errno
import os
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="zarrfs commit", description="Commit the writes of a mounted Icechunk "
                                     "branch (docs/icechunk.md).")
    parser.add_argument("mountpoint", help="where the branch is mounted (writable)")
    parser.add_argument("-m", "--message", required=True, help="the commit message")
    args = parser.parse_args(argv)
    try:
        os.setxattr(args.mountpoint, "user.icechunk.commit", args.message.encode("utf-8", "surrogateescape"))
        snapshot = os.getxattr(args.mountpoint, "user.icechunk.snapshot").decode()
    except OSError as e:
        print(f"zarrfs commit: {args.mountpoint}: {e.strerror}{_meaning(e.errno)}", file=sys.stderr)
        return 1
    print(snapshot)
    return 0


def _meaning(code: int | None) -> str:
    return {errno.EOPNOTSUPP: " (not a zarrfs mount of an Icechunk branch)",
            errno.EROFS: " (mounted read-only, or a tag or snapshot: mount a branch without -o ro)",
            errno.EBUSY: " (another writer's commit conflicts: the daemon's log says which; the changes are kept)",
            }.get(code or 0, "")
