"""Export a trained policy: ``python -m navexp.export checkpoint=<run dir or model_<it>.pt> [out=DIR]``.

TorchScript, ONNX and a numpy ``policy.npz`` with its metadata (``navexp.deploy.export``).
"""

import sys

from navexp.config.cli import HELP_FLAGS, run_tool
from navexp.deploy.export import main
from navexp.extras import require


def checked_main() -> None:
    """``main``, once the ONNX exporter's packages are there (the ``deploy`` extra)."""
    if not any(a in HELP_FLAGS for a in sys.argv[1:]):
        require("onnxscript", "deploy", "navexp.export (its ONNX file)")
    main()


def cli() -> None:
    """Console script ``navexp-export``: bad input ends in one line, exit status 2."""
    run_tool(checked_main)


if __name__ == "__main__":
    cli()
