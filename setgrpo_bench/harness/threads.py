"""How many torch threads a process uses (DESIGN §9): under a second load, a forward/backward with 2
threads on 2 cores ran 3× slower than with 1, so every process is given its share."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def set_threads(threads: int) -> int:
    """torch's thread count: ``threads``, or (0) ``OMP_NUM_THREADS`` when it is set, else every core
    this process may run on. Returns the count set."""
    import torch  # only a process that computes sets threads: a sweep's parent imports no torch

    count = threads or _omp_threads() or available_cores()
    torch.set_num_threads(count)
    return count


def _omp_threads() -> int:
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 0
