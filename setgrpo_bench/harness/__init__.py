"""Training runs, held-out evaluation and reports (DESIGN §9)."""

from .evaluate import aggregate, evaluate
from .run import TrainingStopped, run

__all__ = ["TrainingStopped", "aggregate", "evaluate", "run"]
