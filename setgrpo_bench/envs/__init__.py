"""Gymnasium environments over rubric-graded benchmarks (DESIGN §5)."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "..tasks.catalog_benchmarks": ["benchmark_paths", "load_env_benchmark"],
    ".registration": ["env_id", "register_catalog", "register_env", "registered_env_ids"],
    ".rubric_env": ["RubricEnv"],
    ".spaces": ["UnicodeText"],
})
