"""Content hashes that name what a result depends on (suites, policies, protocols, configs)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_hash(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (hex), stable across processes and platforms."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()

