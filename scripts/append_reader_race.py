"""Page-cache readers of NAME.bin while another process appends, under load (issue 39;
docs/writing.md, "Appending"): a stress run of what tests/fuse/test_mount_growth.py's
test_page_cache_readers_see_every_record_as_appended checks once. Before the mount stopped
the kernel dropping a file's pages for each new mtime (fs/kernel_caching.py), it showed a
record read as zeros in most runs of 10,000 appends with two CPU burners.

    PYTHONPATH=. .venv/bin/python scripts/append_reader_race.py [RECORDS] [BURNERS] [STYLES]

A writer appends 60-byte records one write each (O_APPEND, unbuffered) to an empty array of a
mount of a local store; reader processes re-read NAME.bin meanwhile, each in one STYLE:
`read` (open, read it all, close), `tail` (one descriptor read on from where it stopped, as
tail -f does), `memmap` (np.memmap made again each time), `direct` (O_DIRECT, past the page
cache). BURNERS processes spin on the CPUs. Each reader prints the bytes it saw wrong, if any.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from mounting import mounted  # noqa: E402  (the tests' mount helper: always unmounts and reaps)

READER = r'''
import mmap, os, sys, time
import numpy as np
path, final, style = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print("reading", flush=True)
bad, deadline = [], time.monotonic() + 300

def check(data):
    values = np.frombuffer(data[:len(data) - len(data) % 60], "<i4")
    wrong = np.flatnonzero(values != np.arange(len(values), dtype="<i4") * 7 + 1)
    if len(wrong):
        bad.append(f"bytes {wrong[0] * 4}..{wrong[-1] * 4 + 4} of {len(data)} wrong")
    return len(data)

if style == "tail":
    seen = bytearray()
    with open(path, "rb", buffering=0) as f:
        while len(seen) < final and time.monotonic() < deadline:
            seen += f.read(1 << 16)
            check(bytes(seen))
else:
    while time.monotonic() < deadline:
        if style == "direct":
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            buffer = mmap.mmap(-1, os.fstat(fd).st_size + 4096)  # page-aligned, as O_DIRECT wants
            data = bytes(buffer[:os.preadv(fd, [buffer], 0)])
            os.close(fd)
        elif style == "memmap":
            size = os.stat(path).st_size
            data = bytes(np.memmap(path, "u1", "r", shape=(size - size % 60,))) if size >= 60 else b""
        else:
            with open(path, "rb") as f:
                data = f.read()
        if check(data) >= final:
            break
print(style, "saw wrong bytes:" if bad else "saw every record as written", *bad[:3], flush=True)
'''


def main(count: int = 10_000, burners: int = 2, styles: str = "read,tail,memmap") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "g.zarr"
        group = zarr.open_group(str(root), mode="w", zarr_format=3)
        group.create_array("frames", shape=(0, 3, 5), chunks=(2, 3, 5), dtype="<i4", fill_value=-1)
        spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
        try:
            with mounted(root, tmp) as m:
                data = m / "frames.bin"
                readers = [subprocess.Popen([sys.executable, "-c", READER, str(data), str(count * 60), style],
                                            stdout=subprocess.PIPE, text=True) for style in styles.split(",")]
                for reader in readers:
                    assert reader.stdout.readline() == "reading\n"
                with open(data, "ab", buffering=0) as f:
                    for r in range(count):
                        f.write((np.arange(r * 15, (r + 1) * 15, dtype="<i4") * 7 + 1).tobytes())
                for reader in readers:
                    print(reader.communicate(timeout=600)[0].strip())
        finally:
            for process in spinning:
                process.kill()
                process.wait()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])
