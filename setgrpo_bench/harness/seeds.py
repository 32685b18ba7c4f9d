"""Every random stream of a run, derived from its seed with ``numpy.random.SeedSequence``.

A stream is named, and indexed where there are several (one grading stream per benchmark, keyed
by a hash of its name so that adding a benchmark to the suite does not reshuffle the others'):
``SeedSequence(seed, spawn_key=(stream, *index))``. Streams are statistically independent of each
other and of other seeds, unlike ``seed * 1000 + k`` arithmetic, where seed 1's stream 0 is seed 0's
stream 1000.
"""

from __future__ import annotations

import hashlib

import numpy as np

STREAMS = ("sampling", "tasks", "audits", "grading", "eval_sampling", "eval_grading", "judges", "curve_sampling",
           "curve_grading")
"""Append only: a stream's index is part of its seed."""


def name_key(name: str) -> int:
    """A stable non-negative integer for a benchmark name (a spawn-key index)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


def stream(seed: int, name: str, *index: int) -> np.random.SeedSequence:
    """The seed sequence of stream ``name`` (one of ``STREAMS``) of run ``seed``."""
    return np.random.SeedSequence(seed, spawn_key=(STREAMS.index(name), *index))


def generator(seed: int, name: str, *index: int) -> np.random.Generator:
    """A numpy generator on stream ``name`` of run ``seed``."""
    return np.random.default_rng(stream(seed, name, *index))


def torch_seed(seed: int, name: str) -> int:
    """A 63-bit integer seed for torch's generator on stream ``name`` of run ``seed``."""
    return int(stream(seed, name).generate_state(1, np.uint64)[0] >> np.uint64(1))
