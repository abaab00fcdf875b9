"""Report a sweep: ``python -m navexp.sweep_report <sweep dir | study.db | storage URL> [study] [out=DIR]``.

Summary, trial table, parameter importances and plots of an Optuna study (``navexp.sweep.report``).
"""

from navexp.config.cli import run_tool
from navexp.sweep.report import main


def cli() -> None:
    """Console script ``navexp-sweep-report``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
