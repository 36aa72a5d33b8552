"""zarrfs-recover RECOVERY_DIR... [-o OPTION[,OPTION...]] [--force] [--keep]

Writes what a daemon saved at shutdown (engine/recovery.py) into the store it names, opened as a
mount opens its SOURCE: the same -o options (endpoint, region, credentials_file, ca_file,
timeout, anon, symlinks; the others are accepted and have no effect here) and the same
environment (credentials). The recovery directory holds no credentials, only the store's URL.
"""

import argparse
import logging
import shutil
import sys

from zarrfs.cli.command import UsageError, parse_options
from zarrfs.engine import recovery
from zarrfs.errors import ZarrfsError
from zarrfs.names import LineFormatter
from zarrfs.stores.source_url import open_store


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="zarrfs-recover",
                                     description="Write data that a zarrfs daemon could not store back into its store.")
    parser.add_argument("directories", nargs="+", metavar="RECOVERY_DIR")
    parser.add_argument("-o", action="append", default=[], metavar="OPTION[,OPTION...]",
                        help="the mount's options, for an object store (endpoint=, credentials_file=, ...)")
    parser.add_argument("--force", action="store_true", help="write even if the array's shape or type changed")
    parser.add_argument("--keep", action="store_true", help="keep the recovery directory after replaying it")
    args = parser.parse_args(argv)
    try:
        options = parse_options(args.o)[0]
    except UsageError as e:
        print(f"zarrfs-recover: {e}", file=sys.stderr)
        return 1
    stderr = logging.StreamHandler(sys.stderr)  # a conflict merged, a request retried: one line each
    stderr.setFormatter(LineFormatter("zarrfs-recover %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[stderr])
    failed = [directory for directory in args.directories if not _replay(directory, options, args.force, args.keep)]
    return 1 if failed else 0


def _replay(directory: str, options, force: bool, keep: bool) -> bool:
    try:
        manifest = recovery.load(directory)
        store = open_store(recovery.saved_from(manifest), False, options.remote, options.follow_symlinks)
        n = recovery.replay(directory, manifest, store, force)
    except (OSError, ValueError, KeyError, ZarrfsError) as e:
        print(f"zarrfs-recover: {directory}: {e}", file=sys.stderr)
        return False
    except BaseException as e:  # a bug, or an answer obstore panics on (a PanicException is no Exception)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(f"zarrfs-recover: {directory}: unexpected error: {type(e).__name__}: {first}", file=sys.stderr)
        return False
    print(f"{directory}: {n} pieces written and stored")
    if not keep:
        shutil.rmtree(directory)
    return True


if __name__ == "__main__":
    sys.exit(main())
