"""The package's imports flow one way (DESIGN §2): every import, lazy ones inside functions included,
goes to the same subpackage or a lower layer, and no modules import each other in a cycle."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import setgrpo_bench

PACKAGE = Path(setgrpo_bench.__file__).parent
LAYERS = ["errors", "hashing", "files", "lazy", "catalog", "tasks", "graders", "envs", "policy", "judges", "agents", "harness", "integrations",
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


def _third_party(path: Path) -> set[str]:
    """Top-level names of the non-package modules ``path`` imports (anywhere in the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - {"setgrpo_bench"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) == "agents"))
def test_agents_touch_no_model(module):
    """An agent decides from arrays: nothing in ``agents`` imports torch or transformers (the geometry,
    the objective and the update are the harness's), so no agent can reach the policy's weights."""
    assert not _third_party(MODULES[module]) & {"torch", "transformers"}, module


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


HEAVY = ("torch", "transformers", "matplotlib")
"""Libraries that take seconds to import; a pure module must not pull them in."""


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.rsplit("loaded:", 1)[1].split()


@pytest.mark.parametrize("module", ["setgrpo_bench.harness.pooled", "setgrpo_bench.leaderboard.submission",
                                    "setgrpo_bench.leaderboard.aggregate", "setgrpo_bench.agents.config",
                                    "setgrpo_bench.agents.presets", "setgrpo_bench.agents.setgrpo"])
def test_pure_modules_import_no_model_or_plotting_library(module):
    assert _loaded_after(f"import {module}") == []


def test_the_cli_help_imports_no_model_or_plotting_library():
    """``--help`` (and ``run --help``, which reads the presets) answers without torch (its time is in
    benchmarks/test_cli_speed.py)."""
    code = ("from setgrpo_bench.cli import main\nfor argv in (['--help'], ['run', '--agent', 'setgrpo', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass")
    assert _loaded_after(code) == []


def test_importing_any_module_changes_no_global_state():
    """Importing every module of the package leaves matplotlib's backend and settings as they were (a
    notebook that imports the board keeps its own backend): figures are ``Figure`` objects, never pyplot's."""
    probe = (
        "import importlib, matplotlib, pkgutil, setgrpo_bench\n"
        "before = dict(matplotlib.rcParams)\n"
        "for info in pkgutil.walk_packages(setgrpo_bench.__path__, 'setgrpo_bench.'):\n"
        "    if not info.name.endswith(('vllm_engine', '__main__')):\n"
        "        importlib.import_module(info.name)\n"
        "import sys\n"
        "changed = sorted(k for k, v in matplotlib.rcParams.items() if before.get(k) != v)\n"
        "print('pyplot' in sys.modules, matplotlib.get_backend(), changed)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, "MPLBACKEND": "svg"})
    assert done.stdout.split("\n")[-2] == "False svg []", done.stdout + done.stderr


def test_modules_and_functions_stay_readable():
    """No module over 350 lines and no function over 60: a module does one job, a function one step."""
    long_modules = {name: n for name, path in MODULES.items()
                    if (n := len(path.read_text(encoding="utf-8").splitlines())) > 350}
    long_functions = {f"{name}.{node.name}": node.end_lineno - node.lineno + 1
                      for name, path in MODULES.items()
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60}
    assert long_modules == {} and long_functions == {}
