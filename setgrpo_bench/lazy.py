"""Lazy re-exports for a package's ``__init__`` (PEP 562): ``from setgrpo_bench.agents import resolve_config``
works as before, but importing a package loads none of its submodules until a name is used, so a
pure module (pooled statistics, a config, the submission schema) never pulls in torch or matplotlib."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """(``__getattr__``, ``__dir__``, ``__all__``) of ``package`` for ``exports`` ({".module": [names]})."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where[name], package), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
