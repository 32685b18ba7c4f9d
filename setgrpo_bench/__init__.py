"""setgrpo_bench: RL on open-ended tasks graded by noisy rubric judges.

Importing the package registers every benchmark of the catalog as ``setgrpo/<Benchmark>-v0``.
"""

from .envs import RubricEnv, register_env
from .envs.registration import register_catalog

__version__ = "0.2.0"
__all__ = ["RubricEnv", "__version__", "register_env"]

register_catalog()
