"""Export a trained policy: ``python -m navexp.export checkpoint=<run dir or model_<it>.pt> [out=DIR]``.

TorchScript, ONNX and a numpy ``policy.npz`` with its metadata (``navexp.deploy.export``).
"""

from navexp.config.cli import run_tool
from navexp.deploy.export import main


def cli() -> None:
    """Console script ``navexp-export``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
