"""Task instances, rubric criteria, programmatic checks, scoring and benchmarks (DESIGN §3)."""

from .benchmark import SPLITS, Benchmark, FileBenchmark, ProceduralBenchmark, load_benchmark, validate_benchmark
from .checks import CHECK_TYPES, ResponseView, build_check
from .model import CATEGORIES, Criterion, TaskInstance
from .scoring import SCORE_RULES, rubric_score

__all__ = [
    "CATEGORIES", "CHECK_TYPES", "SCORE_RULES", "SPLITS", "Benchmark", "Criterion", "FileBenchmark",
    "ProceduralBenchmark", "ResponseView", "TaskInstance", "build_check", "load_benchmark", "rubric_score",
    "validate_benchmark",
]
