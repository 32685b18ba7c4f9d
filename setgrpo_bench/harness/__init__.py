"""Training runs, held-out evaluation and reports (DESIGN §9)."""

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".averages": ["aggregate"],
    ".evaluation": ["evaluate"],
    ".runner": ["TrainingStopped", "run"],
})
