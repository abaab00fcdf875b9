"""Where the shipped files live: the Hydra config tree and the named sweep spaces (no imports)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
"""The shipped config tree (Hydra's config dir: groups, scenarios, suites)."""
SWEEPS_DIR = ROOT / "sweeps"
"""Named sweep spaces (``sweep.space=<name>``)."""
