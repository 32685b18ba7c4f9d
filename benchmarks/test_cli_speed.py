"""How fast the command line answers: ``python -m setgrpo_bench --help`` against a bare interpreter.

    pytest benchmarks/test_cli_speed.py --benchmark-only -s

Target: the help answers within 1 s on an idle 2-core machine (the ratio to ``python -c pass`` is
printed, so that the number does not depend on how fast the machine starts Python).
"""

import subprocess
import sys

import pytest

TIMES: dict[str, float] = {}


def _call(argv: list[str]) -> None:
    subprocess.run([sys.executable, *argv], check=True, capture_output=True)


@pytest.mark.parametrize("name, argv", [("python", ["-c", "pass"]), ("help", ["-m", "setgrpo_bench", "--help"]),
                                        ("run_help", ["-m", "setgrpo_bench", "run", "--agent", "setgrpo", "--help"])])
def test_cli_start(benchmark, name, argv):
    benchmark.pedantic(_call, args=(argv,), rounds=5, warmup_rounds=1)
    TIMES[name] = benchmark.stats.stats.mean
    if name != "python" and "python" in TIMES:
        print(f"\n{name}: {TIMES[name]:.2f} s ({TIMES[name] / TIMES['python']:.1f}× a bare interpreter; target ≤ 1 s)")
