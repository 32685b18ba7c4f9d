"""Task instances, rubric criteria, programmatic checks, scoring and benchmarks (DESIGN §3)."""

from .benchmark import SPLITS, Benchmark
from .checks import CHECK_TYPES, build_check
from .loading import load_benchmark, validate_benchmark
from .model import CATEGORIES, Criterion, TaskInstance
from .procedural import ProceduralBenchmark
from .response import ResponseView
from .scoring import SCORE_RULES, rubric_score
from .task_files import FileBenchmark

__all__ = [
    "CATEGORIES", "CHECK_TYPES", "SCORE_RULES", "SPLITS", "Benchmark", "Criterion", "FileBenchmark",
    "ProceduralBenchmark", "ResponseView", "TaskInstance", "build_check", "load_benchmark", "rubric_score",
    "validate_benchmark",
]
