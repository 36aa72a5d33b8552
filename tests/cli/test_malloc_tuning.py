"""The daemon's glibc malloc settings (cli/command.py, keep_freed_chunk_memory): a chunk-sized
block comes from a heap and, freed, stays there for the next chunk, instead of being mapped anew
and handed back to the kernel (a page fault per 4 KiB of every chunk). Run in a fresh interpreter:
the settings are process-wide and glibc's own default moves its threshold after the first free."""

import json
import platform
import subprocess
import sys

import pytest

from zarrfs.cli.command import ARENA_MAX

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

PROBE = """
import ctypes, json
from zarrfs.cli.command import keep_freed_chunk_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
keep_freed_chunk_memory()
before = libc.mallinfo2()
blocks = [libc.malloc(1 << 20) for _ in range(64)]  # the 64 MiB a remote stream fetches ahead
for block in blocks:
    ctypes.memset(block, 1, 1 << 20)
mapped = libc.mallinfo2().hblks - before.hblks
for block in blocks:
    libc.free(block)
kept = libc.mallinfo2().fordblks - before.fordblks
print(json.dumps({"mapped": mapped, "kept_mib": kept >> 20}))
"""


def test_chunk_sized_blocks_come_from_the_heap_and_stay_there_once_freed():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    probe = json.loads(out)
    assert probe["mapped"] == 0  # glibc's default maps every block of 128 KiB and more on its own
    assert probe["kept_mib"] >= 60  # its default trims a heap's free top beyond 128 KiB (then 2 MiB)


ARENAS_PROBE = """
import ctypes, threading
from zarrfs.cli.command import keep_freed_chunk_memory

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
keep_freed_chunk_memory()
all_holding = threading.Barrier(32)

def hold_a_chunk():  # as the threads fetching ahead of a stream do, all at once
    block = libc.malloc(1 << 20)
    all_holding.wait()
    libc.free(block)

threads = [threading.Thread(target=hold_a_chunk) for _ in range(32)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_stats()  # a paragraph per arena on stderr
"""


def test_the_threads_of_a_stream_share_few_arenas():
    err = subprocess.run([sys.executable, "-c", ARENAS_PROBE], capture_output=True, text=True, check=True).stderr
    arenas = err.count("Arena ")
    assert 1 <= arenas <= ARENA_MAX  # glibc's default: a new arena per thread up to 8 per core
