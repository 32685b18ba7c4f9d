"""The package's imports flow one way (DESIGN §2): every import, lazy ones inside functions included,
goes to the same subpackage or a lower layer, and no modules import each other in a cycle."""

import ast
from pathlib import Path

import pytest

import setgrpo_bench

PACKAGE = Path(setgrpo_bench.__file__).parent
LAYERS = ["errors", "catalog", "tasks", "graders", "envs", "policy", "judges", "agents", "harness", "integrations",
          "leaderboard", "cli", "__main__"]
"""Lowest first. ``judges`` (LLM judge backends that load a model) sits above ``policy``."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path) -> set[str]:
    """Package modules imported anywhere in ``path`` (module level or inside functions)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in MODULES else stem for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in MODULES}
    return out


GRAPH = {name: _imports(name, path) - {name} for name, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def test_every_module_is_in_a_layer():
    unknown = {_layer(m) for m in MODULES} - set(LAYERS) - {"(root)"}
    assert not unknown, f"modules outside the declared layers: {unknown}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) != "(root)"))
def test_imports_go_down_or_sideways(module):
    rank = LAYERS.index(_layer(module))
    upward = sorted(t for t in GRAPH[module] if _layer(t) != "(root)" and LAYERS.index(_layer(t)) > rank)
    assert not upward, f"{module} imports higher layers: {upward}"


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if _layer(nxt) == "(root)":
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(MODULES):
        if module not in state and _layer(module) != "(root)":
            visit(module)


def test_the_checker_sees_lazy_relative_imports():
    """The parser resolves a function-level relative import (the kind that hides cycles)."""
    source = "def f():\n    from ..envs import load_env_benchmark\n    from . import engine\n"
    probe = PACKAGE / "policy" / "_probe_for_test.py"
    probe.write_text(source)
    try:
        MODULES["setgrpo_bench.policy._probe_for_test"] = probe
        assert _imports("setgrpo_bench.policy._probe_for_test", probe) == {
            "setgrpo_bench.envs", "setgrpo_bench.policy.engine"}
    finally:
        probe.unlink()
        del MODULES["setgrpo_bench.policy._probe_for_test"]
