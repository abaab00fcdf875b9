"""What an evaluation ran on and where its result goes: the record every eval.json carries
(checkpoint, overrides, scenario file, layout seed, suite), the default output name next to the
checkpoint, and the check that an output is writable and holds no other evaluation."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from navexp.task.maps.scenario_files import resolve_scenario_path


def evaluation_record(
    cfg: DictConfig, checkpoint: str | None, overrides: list[str], suite: str | None = None
) -> dict:
    """What an evaluation ran on: the checkpoint, the overrides, the scenario file, the layout seed and
    the suite (None: the run's env alone)."""
    scen = cfg.env.get("scenarios")
    return {
        "checkpoint": checkpoint,
        "overrides": list(overrides),
        "scenario_file": str(resolve_scenario_path(str(scen)).resolve()) if scen else None,
        "layout_seed": int(cfg.seed) + int(cfg.eval.layout_seed_offset),
        "suite": suite,
    }


RECORD_KEYS = ("checkpoint", "overrides", "scenario_file", "layout_seed", "suite")


def default_output(ckpt_path: str, cfg: DictConfig, overrides: list[str], suite: str | None = None) -> Path:
    """``eval_<model>_<env>_<layout seed>[_suite-<name>][_<hash of the other overrides>].json`` next to
    the checkpoint."""
    env = next((o.split("=", 1)[1] for o in overrides if o.startswith("env=")), "run")
    if cfg.env.get("scenarios"):
        env += "-" + Path(str(cfg.env.scenarios)).stem
    rest = sorted(o for o in overrides if not o.startswith("env="))
    tag = "_" + hashlib.sha1("\n".join(rest).encode()).hexdigest()[:8] if rest else ""
    seed = int(cfg.seed) + int(cfg.eval.layout_seed_offset)
    if suite:
        tag = f"_suite-{Path(suite).stem}{tag}"
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in env)
    ckpt = Path(ckpt_path)
    return ckpt.parent / f"eval_{ckpt.stem}_{safe}_{seed}{tag}.json"


def check_output(out: Path, record: dict, explicit: bool) -> None:
    """Before any episode runs: the output's folder is writable, and a default-named file that holds a
    different evaluation is never replaced (an ``out=`` the user gave is theirs to overwrite)."""
    if out.is_dir():
        raise ValueError(f"out={str(out)!r} is a directory; give the path of a .json file")
    if not explicit and out.is_file():
        try:
            old = json.loads(out.read_text())
        except (OSError, ValueError):
            old = {}
        if any(old.get(k) != record[k] for k in RECORD_KEYS):
            raise FileExistsError(
                f"{out} already holds another evaluation (checkpoint {old.get('checkpoint')}, overrides "
                f"{old.get('overrides')}); nothing was run. Pass out=<path> to write elsewhere."
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out.parent, prefix=".write_probe_")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OSError(e.errno, f"out={out}: cannot write there ({e.strerror or e}); nothing was run") from e
