"""Page-cache readers of NAME.bin while another process appends, under load (issue 39;
docs/writing.md, "Appending"): tests/fuse/test_mount_growth.py's
test_page_cache_readers_see_every_record_as_appended (read, tail -f and np.memmap readers beside
10,000 appends) run again and again with CPU burners beside it. Before the mount stopped the
kernel dropping a file's pages for each new mtime (fs/kernel_caching.py), most such runs showed a
record read as zeros. With "s3" the test's SeaweedFS variant runs (a writable mount of an object
store, where the kernel dropped the pages for an mtime until the mount did it itself, for another
writer's change only).

    .venv/bin/python scripts/append_reader_race.py [RUNS] [BURNERS] [s3]
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/fuse/test_mount_growth.py::test_page_cache_readers_see_every_record_as_appended"


def main(runs: int = 10, burners: int = 2, store: str = "local") -> None:
    test = TEST + ("_on_an_object_store" if store == "s3" else "")
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
    try:
        passed = sum(subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                                    cwd=ROOT).returncode == 0 for _ in range(runs))
    finally:
        for process in spinning:
            process.kill()
            process.wait()
    print(f"{passed} of {runs} runs: every reader saw every record as written")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])
