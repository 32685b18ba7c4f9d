"""A run's checkpoints (DESIGN §9): weights, tokenizer and trainer state written as one complete folder,
read back with every random stream, and the newest usable one found on resume (falling back past a
damaged one, never silently starting again)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console
from transformers import AutoModelForCausalLM

from ..errors import SetgrpoBenchError
from .rundir import CONFIG, RunDir, RunDirError, checksum_problems, read_record
from .state_file import StateFileError, load_state, save_state
from .trainer import Trainer


def save_checkpoint(rundir: RunDir, trainer: Trainer, step: int) -> None:
    """Weights, tokenizer and trainer state of ``step``, committed only when complete (a failed write,
    e.g. a full disk, leaves the previous checkpoints as they were)."""
    staging = rundir.new_checkpoint_folder(step)
    try:
        trainer.policy.model.save_pretrained(staging)
        trainer.policy.tokenizer.save_pretrained(staging)
        save_state(staging / "trainer_state.pt", {"step": step, "trainer": trainer.state_dict()})
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        free = shutil.disk_usage(rundir.root).free / 2**20
        raise RunDirError(f"cannot write the checkpoint of step {step} in {rundir.checkpoints} ({type(exc).__name__}: "
                          f"{str(exc)[:120]}; {free:.0f} MB free on that disk). Free some space and run again with "
                          "--resume: the previous checkpoint is intact") from None
    rundir.commit_checkpoint(staging, step)


class CheckpointError(SetgrpoBenchError):
    """A checkpoint folder cannot be read back."""


def load_checkpoint(folder: Path, trainer: Trainer) -> int:
    """Restore weights, optimiser and every random state; returns the checkpoint's step."""
    for name in ("config.json", "model.safetensors", "trainer_state.pt"):
        if not (folder / name).is_file():
            raise CheckpointError(f"{folder / name} is missing")
    damaged = checksum_problems(folder)
    if damaged:
        raise CheckpointError("; ".join(damaged))
    try:
        state = load_state(folder / "trainer_state.pt")  # plain data only: a crafted pickle is refused unread
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")
        trainer.policy.model.load_state_dict(model.state_dict())
        trainer.load_state_dict(state["trainer"])
    except StateFileError as exc:
        raise CheckpointError(str(exc)) from None
    except Exception as exc:  # a damaged file: any reader may fail in its own way  # noqa: BLE001
        raise CheckpointError(f"{folder} is damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    return int(state["step"])


def resume_from(rundir: RunDir, trainer: Trainer, console: Console) -> int:
    """The step to continue from: the newest usable checkpoint (falling back past damaged ones, and
    saying so), 0 when the run had not yet written its first checkpoint. Never silently starts again:
    a run that logged a step after its first checkpoint but has no usable one is refused with the way
    out. (A step's metrics line is written before its checkpoint, so a run killed between the two at
    its first checkpoint step logged that step and has no checkpoint: it starts again from 0.)"""
    problems = []
    for folder in rundir.checkpoint_candidates():
        try:
            step = load_checkpoint(folder, trainer)
        except CheckpointError as exc:
            problems.append(str(exc))
            console.print(f"[yellow]warning:[/] {exc}; trying the checkpoint before it", highlight=False, soft_wrap=True)
            continue
        console.print(f"resuming {rundir.root} from step {step} ({folder.name})", highlight=False, soft_wrap=True)
        return step
    logged = [r["step"] for r in rundir.metrics()]
    saved = read_record(rundir.root / CONFIG)["config"]
    first_checkpoint = min(saved["checkpoint_every"], saved["steps"])
    if logged and max(logged) > first_checkpoint:
        found = "; ".join(problems) if problems else f"no checkpoint in {rundir.checkpoints}"
        raise CheckpointError(f"cannot resume {rundir.root}: steps {logged[0]}–{logged[-1]} were logged but {found}. "
                              "Pass --overwrite to start the run again from step 0 (its logged steps are discarded).")
    return 0
