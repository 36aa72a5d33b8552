"""The daemon's own cost per READ, without a mount and without a clock: Python calls per request
(sys.setprofile), and under callgrind the instructions per request.

    .venv/bin/python scripts/request_cost.py [--layout uncompressed] [--size 4096|1048576] [--requests 200] [--nozerocopy]
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p .venv/bin/python scripts/request_cost.py --requests 20 --quiet
    valgrind ... --requests 220 --quiet     # (instructions of 220 - those of 20) / 200 = per request

Calls Operations.read_buf as libfuse's read_buf callback does, on a 64 MiB float32 array of 1 MiB
chunks: --size 4096 at random offsets (the 4 KiB pread), --size 1048576 in order (a stream's
requests). Each reply is freed as libfuse frees it; what libfuse and the kernel do with it
afterwards (the copy or splice into /dev/fuse, and for a reply of file descriptors, libfuse's
pread) is not counted: load-independent, what Python and the libraries under it execute.
"""

import argparse
import ctypes
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

MIB = 1 << 20


def build(root: Path, layout: str) -> Path:
    import zarr
    from zarr.codecs import BloscCodec, ZstdCodec
    compressors = {"uncompressed": None, "zstd": [ZstdCodec(level=0)],
                   "blosc": [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]}[layout]
    n = 64 * MIB // 4
    data = np.sin(np.arange(n, dtype=np.float32) / 1000)
    path = root / "data.zarr"
    z = zarr.create_array(str(path), shape=(n,), dtype="float32", fill_value=0.0, chunks=(MIB // 4,),
                          compressors=compressors)
    z[...] = data
    return path


def free_reply(address: int) -> None:
    """What libfuse does after sending a reply: free the memory buffers and the bufvec."""
    from zarrfs.engine.buffers import free
    from zarrfs.fuse import replies
    vector = replies.FuseBufvec.from_address(address)
    first = address + replies.FuseBufvec.buf.offset
    for i in range(vector.count):
        buf = replies.FuseBuf.from_address(first + i * replies.BUF_STRIDE)
        if not buf.flags & replies.FUSE_BUF_IS_FD:
            free(buf.mem)
    free(address)
    replies.release_lent()  # what the next callback on this thread does


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="uncompressed", choices=("uncompressed", "zstd", "blosc"))
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--nozerocopy", action="store_true")
    parser.add_argument("--cache-mib", type=int, default=512,
                        help="cache_size: 2 makes every random 4 KiB read a first touch, as on a large array")
    parser.add_argument("--source", help="an array built by an earlier run with --keep (under callgrind, building is slow)")
    parser.add_argument("--keep", help="build the array in this directory and keep it")
    parser.add_argument("--quiet", action="store_true", help="no call counting (under callgrind)")
    args = parser.parse_args(argv)
    from zarrfs.fs.filesystem import Options
    from zarrfs.fuse.operations import Operations
    with tempfile.TemporaryDirectory() as tmp:
        if args.source:
            path = Path(args.source)
        else:
            path = build(Path(args.keep or tmp), args.layout)
        ops = Operations(str(path), Options(read_only=True, zero_copy=not args.nozerocopy,
                                                cache_bytes=args.cache_mib * MIB, ahead_bytes=min(16, args.cache_mib // 4) * MIB))
        name = f"/{path.name}.bin"  # a root array's flat file is named after the store
        fh = ops.open(name, os.O_RDONLY)
        nbytes = 64 * MIB
        rng = np.random.default_rng(0)
        if args.size >= MIB:
            offsets = [(i * args.size) % nbytes for i in range(args.requests)]
        else:
            offsets = [int(o) * 4096 for o in rng.integers(0, nbytes // 4096, args.requests)]
        pointer = ctypes.c_void_p()
        calls = 0

        def count(frame, event, arg):
            nonlocal calls
            if event in ("call", "c_call"):
                calls += 1

        def request(offset: int, profile=None) -> None:
            sys.setprofile(profile)
            result = ops.read_buf(fh, ctypes.addressof(pointer), args.size, offset)
            sys.setprofile(None)
            assert result == 0
            free_reply(pointer.value)

        for offset in offsets[:5]:  # warm: imports, the first decode's buffers
            request(offset)
        for offset in offsets:
            request(offset, None if args.quiet else count)
        if not args.quiet:
            mode = "nozerocopy" if args.nozerocopy else "zero copy"
            print(f"{args.layout}, {mode}, {args.size}-byte READs: {calls / len(offsets):.1f} Python calls per "
                  f"request in read_buf (functions and C functions)")
        ops.release(name, fh)


if __name__ == "__main__":
    main()
