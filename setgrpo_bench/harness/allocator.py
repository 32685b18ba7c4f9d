"""Allocator tuning for CPU training with glibc.

Rollouts, per-response gradients and updates allocate and free tensors of tens of MB every step.
glibc serves those with fresh ``mmap`` pages and returns them to the OS on free, so every step pays
page faults to zero the same memory again (measured: the update of a 128-sequence batch on the tiny
policy took 2.6 s after the per-response gradients, 1.0–1.4 s with freed memory kept). Raising the
mmap and trim thresholds keeps freed memory in the heap for reuse, as jemalloc or tcmalloc would.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Raise glibc's trim and mmap thresholds to 1 GiB; True when applied (glibc on Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl without mallopt)
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, KEEP_BYTES)) and bool(mallopt(M_MMAP_THRESHOLD, KEEP_BYTES))
