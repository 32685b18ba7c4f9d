"""Content hashes that name what a result depends on (suites, policies, protocols, configs)."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any


def stable_hash(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (hex), stable across processes and platforms."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()



@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over this package's Python source (path and content of every module): what a cached
    result computed by the code is keyed by, so an edit of any module computes it again."""
    root = Path(__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    return stable_hash({str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files})
