"""keep_freed_memory: glibc's mmap threshold is raised, so a freed large block is reused, not unmapped."""
import sys

import pytest

from gpurl.train.host_memory import keep_freed_memory

pytestmark = pytest.mark.cpu


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt: Linux only")
def test_large_blocks_come_from_the_heap_after_it():
    import ctypes

    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    # An mmapped block is page-aligned plus glibc's 16-byte header; a heap block of 8 MiB is not
    # (it is carved from the arena), so the address tells where it came from.
    blocks = [libc.malloc(8 << 20) for _ in range(3)]
    try:
        assert all(b % 4096 != 16 for b in blocks), [hex(b) for b in blocks]
    finally:
        for b in blocks:
            libc.free(b)
