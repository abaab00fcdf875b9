"""Where the shipped files live (the Hydra config tree, the named sweep spaces) and where a run directory
records its command line (no navexp imports)."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
"""The shipped config tree (Hydra's config dir: groups, scenarios, suites)."""
SWEEPS_DIR = ROOT / "sweeps"
"""Named sweep spaces (``sweep.space=<name>``)."""


def overrides_record(run_dir: Path) -> Path | None:
    """The run's latest record of its task overrides: the newest resume's
    ``.hydra/resume_<time>/overrides.yaml`` (a resume repeats the run's overrides before its own) whose
    launch trained (its directory is named in a ``segments`` command line of ``run_info.json``: a
    resume refused before training left Hydra's copy but no segment), else the first launch's
    ``.hydra/overrides.yaml``; None for a run made without Hydra (the Python API)."""
    hydra_dir = Path(run_dir) / ".hydra"
    try:
        segments = json.loads((Path(run_dir) / "run_info.json").read_text()).get("segments") or []
    except (OSError, ValueError, AttributeError):
        segments = []
    launched = " ".join(" ".join(map(str, s.get("argv") or [])) for s in segments if isinstance(s, dict))
    resumes = [p for p in sorted(hydra_dir.glob("resume_*/overrides.yaml")) if p.parent.name in launched]
    if resumes:
        return resumes[-1]
    first = hydra_dir / "overrides.yaml"
    return first if first.is_file() else None
