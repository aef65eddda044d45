"""A reward model run named as a reward function (GRPO's `reward_model` reward, `run: <folder>`), checked
without MindSpore: a run folder trained with train.objective reward, finished or early-stopped, with a
best checkpoint. GRPO's checks before launch and the scorer at load (core.engine.reward_scorer) ask this."""
from __future__ import annotations

from pathlib import Path

from core.run.rundir import RunDir
from core.spec.config import Config, load_config
from core.spec.errors import MessageError
from core.spec.messages import Message
from core.spec.objectives import spec_of

SCORING_STATES = ("finished", "early_stopped")


class RewardModelError(MessageError):
    """A reward model run that cannot score, or inputs it cannot read; the message says why."""


def finished_reward_run(run_dir: str | Path) -> tuple[RunDir, Config]:
    """(RunDir, Config) of a reward model run that may score; else an error naming the run and what
    it is (not a run folder, another objective's run, not over or over without finishing, no best
    checkpoint)."""
    run = RunDir(run_dir)
    if not run.exists():
        raise RewardModelError(Message("reward.no_run", run=str(run_dir)))
    config = load_config(run.config_path)
    if spec_of(config.train.objective).kind != "reward":
        raise RewardModelError(Message("reward.not_reward_run", run=str(run_dir), objective=config.train.objective))
    state = run.read_status().state
    if state not in SCORING_STATES:
        raise RewardModelError(Message("reward.not_finished", run=str(run_dir), state=state))
    if run.checkpoint_step("best") is None:
        raise RewardModelError(Message("reward.no_best", run=str(run_dir)))
    return run, config
