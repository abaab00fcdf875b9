"""A training that continues a run (``resume=<run or checkpoint>``): the checkpoint it continues, what
its config changes, and the earlier segment's later checkpoints and evaluations moved aside."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from navexp.experiment.repro import SEGMENT_FOLDERS, archive_segment, flat_changes
from navexp.learn.checkpoint import check_resume_source, later_checkpoints, load_checkpoint, stored_config
from navexp.sim import resolve_device


def load_resume(cfg: DictConfig) -> tuple[dict, Path, str | None]:
    """The checkpoint ``cfg.resume`` continues, its run directory and the run's W&B id; a missing,
    truncated or foreign file fails here, nothing touched."""
    ckpt = load_checkpoint(cfg.resume)
    check_resume_source(ckpt, cfg)  # an averaged policy, another ppo.model: refused before anything is built
    run_dir = Path(ckpt["_path"]).parent
    info = run_dir / "run_info.json"
    wandb_id = json.loads(info.read_text()).get("wandb_run_id") if info.is_file() else None
    print(f"[navexp] resuming {ckpt['_path']} (iteration {ckpt['iter']}) in {run_dir}")
    return ckpt, run_dir, wandb_id


def same_device(stored: str, resolved: str) -> bool:
    """Whether a checkpoint's ``env.device`` names the device this launch resolved (``cpu`` and ``auto``
    on a CPU machine); a device this machine lacks (``cuda:0`` without CUDA) is not it."""
    try:
        return resolve_device(stored) == resolved
    except ValueError:
        return False


def config_changes(ckpt: dict, cfg: DictConfig, device: str) -> dict:
    """A resume's config keys that differ from its checkpoint's: ``{key: [checkpoint's, this launch's]}``
    (``resume`` itself, and a device named otherwise but the same, left out)."""
    changed = flat_changes(stored_config(ckpt), OmegaConf.to_container(cfg, resolve=True))
    changed.pop("resume", None)
    stored_device = changed.get("env.device")  # a torchrun rank stores its resolved device ("cpu")
    if stored_device is not None and same_device(str(stored_device[0]), device):
        del changed["env.device"]  # the same device by another name ("auto"): no change
    return changed


def archive_earlier_segment(run_dir: Path, ckpt: dict) -> None:
    """Move the earlier segment's checkpoints after ``ckpt`` and its evaluations (``eval*.json``,
    ``plots/``, ``play/``) to ``segments/<k>/``: its config.yaml and eval.json are kept, not replaced."""
    later = later_checkpoints(run_dir, ckpt)
    evals = sorted(p.name for p in run_dir.glob("eval_*.json"))
    evals += [f"{d}/" for d in SEGMENT_FOLDERS if (run_dir / d).is_dir()]
    folder = archive_segment(run_dir, later)
    if later:
        print(
            f"[navexp] resume from iteration {ckpt['iter']}: the earlier segment's later checkpoints "
            f"{[p.name for p in later]} moved to {folder} (this run continues from "
            f"{Path(ckpt['_path']).name})",
            flush=True,
        )
    if evals:
        print(f"[navexp] resume: the earlier segment's evaluations {evals} moved to {folder}", flush=True)
