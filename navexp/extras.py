"""Optional dependencies: what one tool needs beyond the core install, and the one-line error naming
the extra to install when it is missing (no navexp imports).

    pip install -e ".[deploy]"      # navexp.export: onnx, onnxscript, onnxruntime
    pip install -e ".[wandb]"       # logger=wandb
    pip install -e ".[launchers]"   # hydra/launcher=joblib | submitit_local | submitit_slurm
    pip install -e ".[all]"         # all three; ".[dev]" (the README's install) includes them
"""

from __future__ import annotations

import importlib.util


class MissingExtraError(ImportError, ValueError):
    """An optional dependency is not installed; the message names the extra that installs it (a
    ValueError too, so the tools and the config checks report it in one line like other bad input)."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken namespace
        return False


def require(module: str, extra: str, what: str) -> None:
    """Raise MissingExtraError naming ``extra`` when ``module`` (needed by ``what``) is not installed."""
    if not installed(module):
        raise MissingExtraError(
            f"{what} needs the Python package {module.split('.')[0]!r}, which is not installed; install "
            f'navexp\'s extra: pip install -e ".[{extra}]" (or pip install -e ".[all]")'
        )
