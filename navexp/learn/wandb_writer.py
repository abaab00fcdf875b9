"""A Weights & Biases log writer for rsl_rl's Logger that never blocks a run.

It writes TensorBoard events too (it is a SummaryWriter), runs offline by default, resumes the same
W&B run on ``resume=``, and degrades to TensorBoard-only with a warning when W&B fails.

W&B's step is the PPO iteration for every scalar. rsl_rl's logger also writes wall-clock series
(``Train/mean_reward/time``, ``Train/mean_episode_length/time``) with the elapsed seconds as their
step (it does so for any writer that is not its own ``WandbLogWriter``); W&B drops every record
whose step is lower than one before, so logged as they come they would cut the history after the
first iteration. Here they go into the current iteration's row with their own x-axis
``Perf/wall_time_s`` (``define_metric``); TensorBoard gets them as rsl_rl wrote them. Success metrics
(tags with ``success`` in their name) are summarised as their maximum and last value.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from PIL import Image
from rsl_rl.utils.log_writer import LogWriter
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

TIME_AXIS = "Perf/wall_time_s"
"""The x-axis of rsl_rl's wall-clock series in W&B (seconds since the run started)."""


class WandbWriter(SummaryWriter, LogWriter):
    """TensorBoard events plus a W&B run in ``<run dir>/wandb``."""

    def __init__(
        self,
        log_dir: str,
        project: str,
        mode: str = "offline",
        entity: str | None = None,
        group: str | None = None,
        name: str | None = None,
        tags: list[str] | None = None,
        run_id: str | None = None,
        config: dict | None = None,
        job_type: str | None = None,
        purge_step: int | None = None,
    ) -> None:
        super().__init__(log_dir, flush_secs=10, purge_step=purge_step)
        self.run = None
        self._step: int | None = None
        """The iteration of the latest per-iteration scalar (W&B's step)."""
        self._defined: set[str] = set()
        if mode not in ("offline", "online", "disabled"):
            raise ValueError(f"logger.mode={mode!r} is invalid; allowed: offline | online | disabled")
        try:
            import wandb  # deferred: heavy, and only a run that logs to W&B needs it

            os.environ.setdefault("WANDB_SILENT", "true")
            self.run = wandb.init(
                project=project,
                entity=entity,
                group=group,
                name=name,
                tags=list(tags or []),
                dir=log_dir,
                mode=mode,
                id=run_id,
                job_type=job_type,
                resume="allow" if run_id else None,
                config=config or {},
                settings=wandb.Settings(init_timeout=30, silent=True),
            )
        except Exception as e:  # any W&B failure must not kill training
            warnings.warn(
                f"W&B init failed ({type(e).__name__}: {e}); logging to TensorBoard only", stacklevel=2
            )
            self.run = None

    @property
    def run_id(self) -> str | None:
        return None if self.run is None else self.run.id

    def _wandb(self, fn, *args: Any, **kwargs: Any) -> None:
        if self.run is None:
            return
        try:
            fn(*args, **kwargs)
        except Exception as e:
            warnings.warn(
                f"W&B call failed ({type(e).__name__}: {e}); continuing with TensorBoard only", stacklevel=3
            )
            self.run = None

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False) -> None:
        super().add_scalar(tag, scalar_value, global_step=global_step, walltime=walltime, new_style=new_style)
        if self.run is None:
            return
        if tag.endswith("/time"):  # rsl_rl's wall-clock series: step = seconds, never W&B's step
            if self._step is not None:
                self._define(tag, step_metric=TIME_AXIS)
                row = {tag: float(scalar_value), TIME_AXIS: float(global_step)}
                self._wandb(lambda: self.run.log(row, step=self._step))
            return
        if global_step is None:
            global_step = self._step  # the current iteration's row, never W&B's own counter
        else:
            self._step = int(global_step) if self._step is None else max(self._step, int(global_step))
        if "success" in tag:
            self._define(tag, summary=("max", "last"))
        self._wandb(lambda: self.run.log({tag: float(scalar_value)}, step=global_step))

    def _define(self, tag: str, step_metric: str | None = None, summary: tuple[str, ...] = ()) -> None:
        """``define_metric`` once per tag: its x-axis, and each summary it keeps (max, last)."""
        if tag in self._defined:
            return
        self._defined.add(tag)
        if step_metric is not None:
            self._wandb(lambda: self.run.define_metric(step_metric))
            self._wandb(lambda: self.run.define_metric(tag, step_metric=step_metric))
        for kind in summary:
            self._wandb(lambda kind=kind: self.run.define_metric(tag, summary=kind))

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None) -> None:
        """TensorBoard image plus a W&B image of the same matplotlib figure."""
        if self.run is not None:
            import wandb  # deferred (see __init__)

            self._wandb(lambda: self.run.log({tag: wandb.Image(figure)}, step=global_step))
        super().add_figure(tag, figure, global_step=global_step, close=close, walltime=walltime)

    def add_gif(self, tag: str, path, global_step: int | None = None) -> None:
        """TensorBoard animated image plus a W&B video of the same GIF file."""
        if self.run is not None:
            import wandb  # deferred (see __init__)

            self._wandb(lambda: self.run.log({tag: wandb.Video(str(path), format="gif")}, step=global_step))
        self._get_file_writer().add_summary(gif_summary(tag, path), global_step)

    def log_summary(self, values: dict[str, Any]) -> None:
        """Final metrics (evaluation) into the W&B run summary."""
        self._wandb(lambda: self.run.summary.update(values))

    def update_config(self, values: dict[str, Any]) -> None:
        self._wandb(lambda: self.run.config.update(values, allow_val_change=True))

    def store_config(self, env_cfg, train_cfg: dict) -> None:
        self.update_config({"rsl_rl": train_cfg})

    def save_model(self, model_path: str, it: int) -> None:
        """Checkpoints stay in the run directory (not uploaded: offline runs sync them on demand)."""

    def stop(self) -> None:
        """Called by rsl_rl at the end of learn(): flush only; the run stays open for the evaluation."""
        self.flush()

    def finish(self, exit_code: int = 0) -> None:
        """Close the W&B run (after the final evaluation is logged) and wait until its records are on disk;
        a non-zero ``exit_code`` marks it failed.

        wandb writes offline records from a service process; tearing the service down flushes them, so
        the run directory is complete when training returns (a later init starts a new service).
        """
        self.flush()
        if self.run is None:
            return
        import wandb  # deferred: wandb is imported only when a run logs to it

        self._wandb(lambda: self.run.finish(exit_code=exit_code))
        try:
            wandb.teardown()
        except Exception as e:
            warnings.warn(f"W&B teardown failed ({type(e).__name__}: {e})", stacklevel=2)


def gif_summary(tag: str, path: Path):
    """A TensorBoard image summary holding the GIF's bytes (the Images tab plays it)."""
    with Image.open(path) as im:
        width, height = im.size
    image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=path.read_bytes())
    return Summary(value=[Summary.Value(tag=tag, image=image)])
