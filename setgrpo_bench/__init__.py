"""setgrpo_bench: RL on open-ended tasks graded by noisy rubric judges.

Importing the package registers every benchmark of the catalog as ``setgrpo/<Benchmark>-v0``.
"""

from .envs.registration import register_catalog
from .lazy import lazy_exports

__version__ = "0.2.0"
__getattr__, __dir__, _exports = lazy_exports(__name__, {".envs": ["RubricEnv", "register_env"]})
__all__ = [*_exports, "__version__"]

register_catalog()  # reads the specs, not the graders: the envs' modules load when an env is made
