"""Gymnasium environments over rubric-graded benchmarks (DESIGN §5)."""

from ..tasks.catalog_benchmarks import benchmark_paths, load_env_benchmark
from .registration import env_id, register_catalog, register_env, registered_env_ids
from .rubric_env import RubricEnv
from .spaces import UnicodeText

__all__ = [
    "RubricEnv", "UnicodeText", "benchmark_paths", "env_id", "load_env_benchmark", "register_catalog",
    "register_env", "registered_env_ids",
]
