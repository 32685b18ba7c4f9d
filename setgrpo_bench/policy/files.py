"""The identity of a model folder, from its files alone (no weights are loaded, no torch is imported)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

LIBRARY_METADATA = ("transformers_version",)
"""JSON keys that name the library version a folder was saved with, not what the model computes."""


def policy_fingerprint(path: Path) -> str:
    """SHA-256 over a model folder's config, weights and tokenizer files, read without loading them.
    JSON files are hashed without library metadata (``transformers_version``), so the same weights
    saved by another transformers release keep their identity."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).iterdir()):
        if file.is_file() and (file.suffix in (".json", ".safetensors", ".bin", ".model", ".txt")):
            digest.update(file.name.encode())
            digest.update(_identity_bytes(file))
    return digest.hexdigest()


def _identity_bytes(file: Path) -> bytes:
    if file.suffix != ".json":
        return file.read_bytes()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return file.read_bytes()
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in LIBRARY_METADATA}
    return json.dumps(data, sort_keys=True, ensure_ascii=False).encode()
