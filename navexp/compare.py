"""Compare runs across seeds: ``python -m navexp.compare DIR [DIR ...] [by=key1,key2] [out=FILE.csv|.md]
[eval=GLOB] [entry=NAME]``.

Finds the runs under the given folders (a sweep dir, a multirun dir, ``outputs/``), groups the
finished ones by their resolved config other than ``seed`` (or by the config keys ``by=``) and prints
the settings every run shares, then per group ``n_runs``, the success rate's mean, 95 % interval and
IQM (from 4 runs), and the other evaluation metrics (moving collisions and the time waited when a run
had moving obstacles), rates in percent, and a legend; runs without
eval.json are listed as unfinished, runs with a file that cannot be read as unreadable (file, reason).
``out=`` writes the table (CSV, or Markdown for
``.md``) and beside it ``<stem>_success.png`` and ``<stem>_profile.png`` (``navexp.analysis.compare``).
``eval=`` reads another evaluation file of each run than its final ``eval.json``: a glob in the run
directory, e.g. ``eval='eval_*suite-ood*.json'`` for ``navexp.evaluate checkpoint=<run> suite=ood``.
``entry=`` aggregates one suite entry (``entry=hairpin_tight``) instead of the suite's main entry: its
success rate, interval, IQM and metrics.
"""

from __future__ import annotations

import sys
from pathlib import Path

from navexp.analysis.compare import Comparison, check_table_path, compare, plot, report, write_table
from navexp.config.cli import HELP_FLAGS, help_text, run_tool

OPTIONS = {"by": None, "out": None, "eval": None, "entry": None}
USAGE = (
    "python -m navexp.compare DIR [DIR ...] [by=key1,key2] [out=FILE.csv|FILE.md] [eval=GLOB] [entry=NAME]"
)


def main(argv: list[str] | None = None) -> Comparison:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in HELP_FLAGS for a in argv):
        print(help_text(OPTIONS, USAGE, (), False, __doc__))
        raise SystemExit(0)
    opts = {}
    dirs = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in OPTIONS and not value:
            raise ValueError(f"option {arg!r} has no value; usage: {USAGE}")
        if sep and key in OPTIONS:
            opts[key] = value
        elif sep:
            raise ValueError(f"unknown option {arg!r}; options: by=, out=, eval=, entry=; usage: {USAGE}")
        else:
            dirs.append(arg)
    if not dirs:
        raise ValueError(f"give at least one directory of runs; usage: {USAGE}")
    by = [k for k in opts.get("by", "").split(",") if k] or None
    evaluation = opts.get("eval", "eval.json")
    if "out" in opts:
        check_table_path(Path(opts["out"]))
    result = compare(dirs, by, evaluation, opts.get("entry"))
    if result.rows:
        print(report(result))
    for path in result.unfinished:
        print(f"unfinished (no {evaluation}): {path}")
    for bad in result.unreadable:  # one line each: the file and what is wrong; the others are compared
        print(f"unreadable, left out: {bad}")
    if not result.rows:
        message = f"no finished runs: none has {evaluation}{_other_evaluations(result.unfinished)}"
        if result.unreadable:
            message = f"no readable finished runs ({len(result.unreadable)} unreadable, listed above)"
        if "out" in opts:  # a table asked for and none to write: an error, the old file left as it was
            raise FileNotFoundError(f"{message}; {opts['out']} not written")
        print(message)
    if "out" in opts and result.rows:
        out = write_table(result, Path(opts["out"]))
        files = plot(result, out.with_suffix(""))
        print(f"[navexp] wrote {out}, " + ", ".join(str(f) for f in files))
    return result


def _other_evaluations(runs: list[Path]) -> str:
    """The evaluation files the runs do have, for a glob that matched none of them."""
    names = sorted({p.name for run in runs for p in run.glob("eval*.json")})
    if not names:
        return ""
    return f" (the runs' evaluation files: {', '.join(names[:6])}{' ...' if len(names) > 6 else ''})"


def cli() -> None:
    """Console script ``navexp-compare``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
