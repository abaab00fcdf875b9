"""Study report: best parameters, every trial, parameter importances and plots; a sweep directory's report
goes to ``<sweep dir>/report/``, a study file's next to the file.

    python -m navexp.sweep_report <sweep dir | study .db or .log file | storage URL> [study_name] [out=DIR]

A sweep directory holds ``study.json`` (written by the sweeper) naming the storage and the study.
The study may still be running: the report is a snapshot and prints the trial counts per state.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState
from optuna.visualization import matplotlib as ovm

from navexp.config.validation import check_path_name
from navexp.sweep.storage import JOURNAL, open_storage, storage_file, study_names

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def _importances(study: optuna.Study, objectives: list[str]) -> dict[str, dict[str, float]]:
    out = {}
    for i, name in enumerate(objectives):
        try:
            target = None if len(objectives) == 1 else (lambda t, i=i: t.values[i])
            out[name] = optuna.importance.get_param_importances(
                study, target=target, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0)
            )
        except Exception as e:  # too few complete trials, or a constant objective
            values = {t.values[i] for t in study.trials if t.state == TrialState.COMPLETE}
            why = (
                "every complete trial has the same value" if len(values) == 1 else f"{type(e).__name__}: {e}"
            )
            out[name] = {"unavailable": why}
    return out


def _plots(study: optuna.Study, out: Path, objectives: list[str]) -> list[str]:
    """The report's figures, each axis named by the study's objectives (``sweep.objectives``, not optuna's
    "Objective Value"), trial numbers on integer ticks, the slice plot a grid of panels."""
    # Deferred: matplotlib only loads when a report is drawn (the sweeper imports this module).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def value(i: int):
        return None if len(objectives) == 1 else (lambda t: t.values[i])

    jobs = [
        (
            "optimization_history.png" if len(objectives) == 1 else f"optimization_history_{name}.png",
            lambda i=i, name=name: _history(study, value(i), name),
        )
        for i, name in enumerate(objectives)
    ]
    jobs.append(("param_vs_success.png", lambda: _slice_grid(study, value(0), objectives[0])))
    if len(objectives) == 2:
        jobs.append(
            (
                "pareto_front.png",
                lambda: _figure(_optuna(ovm.plot_pareto_front, study, target_names=objectives)),
            )
        )
    if not any(t.state == TrialState.COMPLETE for t in study.trials):
        return []
    made = []
    for fname, make in jobs:
        try:
            with warnings.catch_warnings():  # optuna's matplotlib plots are all "experimental"
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                warnings.filterwarnings("ignore", message=".*tight_layout.*")
                fig = make()
            fig.savefig(out / fname, dpi=100)
            plt.close(fig)
            made.append(fname)
        except Exception as e:
            (out / f"{fname}.error.txt").write_text(f"{type(e).__name__}: {e}\n")
    return made


def _optuna(plot, *args, **kwargs):
    """One of optuna's matplotlib plots, its ``plt.style.use("ggplot")`` kept to its own figure: the
    style is global, and left set it greyed every figure the process drew after (a sweep's trials run in
    the sweeper's process: their trajectory figures and GIFs)."""
    import matplotlib

    with matplotlib.rc_context():
        return plot(*args, **kwargs)


def _figure(ax):
    """A figure of optuna's at the report's size (8 x 5 inches at least)."""
    fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
    fig.set_size_inches(max(fig.get_size_inches()[0], 8), 5)
    fig.tight_layout()
    return fig


def _history(study: optuna.Study, target, name: str):
    """optuna's optimization history of one objective: its name on the y axis and in the legend, trial
    numbers on integer ticks (3 trials read 0, 1, 2, not 0.0, 0.5, ...)."""
    from matplotlib.ticker import MaxNLocator

    ax = _optuna(ovm.plot_optimization_history, study, target=target, target_name=name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"{name} per trial")
    return _figure(ax)


def _slice_grid(study: optuna.Study, target, name: str, columns: int = 3):
    """optuna's slice plot (the objective against each searched parameter, coloured by trial number) as a
    grid of ``columns`` panels a row (optuna draws one row, 320 px a panel, its colour bar over the last
    ones), the colour bar beside the grid with integer trial numbers, log axes without minor labels."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator, NullFormatter

    axes = list(np.atleast_1d(_optuna(ovm.plot_slice, study, target=target, target_name=name)).flat)
    fig = axes[0].figure
    for other in [a for a in fig.axes if a not in axes]:
        other.remove()  # optuna's colour bar, drawn again below beside the grid
    cols = min(columns, len(axes))
    rows = -(-len(axes) // cols)
    grid = fig.add_gridspec(rows, cols)
    for i, ax in enumerate(axes):
        ax.set_subplotspec(grid[i // cols, i % cols])
        ax.tick_params(labelleft=i % cols == 0)
        ax.set_ylabel(name if i % cols == 0 else "")
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.set_size_inches(4.2 * cols + 1.2, 3.2 * rows + 0.8)
    fig.set_layout_engine("constrained")
    bar = fig.colorbar(axes[0].collections[0], ax=axes, label="trial number", shrink=0.9)
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    fig.suptitle(f"{name} against each searched parameter")
    return fig


def write_report(study: optuna.Study, out: Path, objectives: list[str] | None = None) -> Path:
    """Write summary.json, trials.md, report.md and PNG plots for ``study`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    n_obj = len(study.directions)
    objectives = list(
        objectives
        or study.metric_names  # set by the sweeper: sweep.objectives
        or (["success_rate"] if n_obj == 1 else [f"objective_{i}" for i in range(n_obj)])
    )
    trials = study.get_trials(deepcopy=False)
    summary = _summary(study, trials, objectives)
    plots = _plots(study, out, objectives)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    table = _trials_table(trials, objectives, n_obj)
    (out / "trials.md").write_text(table + "\n")
    (out / "report.md").write_text("\n".join(_report_lines(summary, objectives, table, plots)) + "\n")
    return out


def _summary(study: optuna.Study, trials: list, objectives: list[str]) -> dict:
    """summary.json: the study, its trial counts per state, the best trial (one objective) or the
    Pareto front (several), and the parameter importances."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    summary: dict = {
        "study_name": study.study_name,
        "objectives": objectives,
        "directions": [d.name.lower() for d in study.directions],
        "trial_states": {s.name: sum(t.state == s for t in trials) for s in TrialState},
    }
    if complete and len(study.directions) == 1:
        best = study.best_trial
        summary.update(
            best_trial=best.number,
            best_value=best.value,
            best_params=best.params,
            best_run_dir=best.user_attrs.get("run_dir"),
        )
    elif complete:
        summary["pareto_front"] = [
            {"trial": t.number, "values": t.values, "params": t.params} for t in study.best_trials
        ]
    summary["importances"] = _importances(study, objectives) if len(complete) >= 2 else {}
    return summary


def _trials_table(trials: list, objectives: list[str], n_obj: int) -> str:
    """trials.md: one Markdown row per trial: state, objective values, parameters, the evaluation
    metrics that are not objectives, and why it failed or where it was pruned."""
    params = sorted({k for t in trials for k in t.params})
    metrics = [
        m
        for m in ("success_rate", "collision_rate", "timeout_rate", "mean_time_to_goal_s")
        if m not in objectives
    ]
    head = ["trial", "state", *objectives, *params, *metrics, "note"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in trials:
        values = list(t.values) if t.values else [None] * n_obj
        note = t.user_attrs.get("fail_reason", "")
        if t.state == TrialState.PRUNED and t.intermediate_values:
            step = max(t.intermediate_values)
            note = f"pruned at it {step} ({t.intermediate_values[step]:.3f})"
        cells = [
            t.number,
            t.state.name,
            *values,
            *(t.params.get(p) for p in params),
            *(t.user_attrs.get(m) for m in metrics),
            note.replace("|", "/")[:120],
        ]
        rows.append("| " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(rows)


def _report_lines(summary: dict, objectives: list[str], table: str, plots: list[str]) -> list[str]:
    """report.md's lines: objectives and trial counts, the best trial or the Pareto front, the
    importances, the trials table and the plots."""
    counts = summary["trial_states"]
    lines = [
        f"# Study `{summary['study_name']}`",
        "",
        "Objectives: "
        + ", ".join(f"{o} ({d})" for o, d in zip(objectives, summary["directions"], strict=True))
        + ". "
        f"Trials: {', '.join(f'{k} {v}' for k, v in counts.items() if v)}.",
        "",
    ]
    if "best_value" in summary:
        lines += _best_lines(summary, objectives[0])
    if "pareto_front" in summary:
        lines += [
            "**Pareto front:**",
            "",
            "| trial | " + " | ".join(objectives) + " |",
            "|---|" + "---|" * len(objectives),
            *[
                f"| {p['trial']} | " + " | ".join(_fmt(v) for v in p["values"]) + " |"
                for p in summary["pareto_front"]
            ],
            "",
        ]
    lines += ["## Parameter importances (fANOVA)", ""]
    for name, imp in summary["importances"].items():
        lines += [f"{name}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in imp.items()), ""]
    if not summary["importances"]:
        lines += ["Needs at least 2 complete trials.", ""]
    return lines + ["## Trials", "", table, "", "## Plots", ""] + [f"![{p}]({p})" for p in plots]


def _best_lines(summary: dict, objective: str) -> list[str]:
    """The best trial's value, parameters and run directory (one objective)."""
    lines = [
        f"**Best:** trial {summary['best_trial']}, {objective} = {summary['best_value']:.4g}",
        "",
        "| parameter | value |",
        "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in summary["best_params"].items()],
        "",
    ]
    if summary.get("best_run_dir"):
        lines += [f"Run directory: `{summary['best_run_dir']}`", ""]
    return lines


def trial_rows(study: optuna.Study, objectives: list[str]) -> tuple[list[str], list[list]]:
    """The study's trials as a table: number, state, every searched parameter, the objective values,
    the run dir (failed and pruned trials included, with their state)."""
    trials = study.get_trials(deepcopy=False)
    params = sorted({k for t in trials for k in t.params})
    columns = ["number", "state", *params, *objectives, "run_dir"]
    rows = []
    for t in trials:
        values = list(t.values) if t.values is not None else [None] * len(objectives)
        row = [t.number, t.state.name.lower(), *(t.params.get(k) for k in params), *values]
        rows.append(row + [t.user_attrs.get("run_dir")])
    return columns, rows


def log_study_run(
    study: optuna.Study,
    out: Path,
    objectives: list[str],
    project: str = "navexp",
    mode: str = "offline",
    entity: str | None = None,
    group: str | None = None,
) -> Path | None:
    """One W&B run for the whole study (``job_type="study"``, group = the trials' group, by default the
    study): a Table of every trial, the best trial in the summary and the report's plots as images,
    written under ``out``. Its id follows from the study name, so every worker that finishes and every
    later report update the same run. Offline by default; returns the run's folder (None when W&B
    failed, with a warning)."""
    import wandb  # deferred: heavy, and only a study logged to W&B needs it

    summary = json.loads((out / "summary.json").read_text())
    columns, rows = trial_rows(study, objectives)
    try:
        run = wandb.init(
            project=project,
            entity=entity,
            group=group or study.study_name,
            id="study-" + hashlib.sha256(study.study_name.encode()).hexdigest()[:12],
            resume="allow",
            job_type="study",
            name=f"study_{study.study_name}",
            tags=[f"study:{study.study_name}", *(f"objective:{o}" for o in objectives)],
            dir=str(out),
            mode=mode,
            config={"study": study.study_name, "objectives": objectives, "directions": summary["directions"]},
            settings=wandb.Settings(init_timeout=30, silent=True),
        )
        run.log({"trials": wandb.Table(columns=columns, data=rows)})
        for png in sorted(out.glob("*.png")):
            run.log({f"report/{png.stem}": wandb.Image(str(png))})
        best = {
            k: summary[k] for k in ("best_trial", "best_value", "best_params", "best_run_dir") if k in summary
        }
        run.summary.update(
            {"trial_states": summary["trial_states"], **{f"best/{k[5:]}": v for k, v in best.items()}}
        )
        folder = Path(run.dir).parent
        run.finish()
        wandb.teardown()
    except Exception as e:  # W&B must never take the study's results with it
        warnings.warn(f"W&B study run failed ({type(e).__name__}: {e}); the report is in {out}", stacklevel=2)
        return None
    return folder


def report_dir(url: str, study_name: str, fallback: Path) -> Path:
    """Where a study's report goes: next to its sqlite or journal file, else ``fallback``. Beside the
    file, ``<dir>/<name>/`` when the file is ``<name>.db`` (the default storage,
    ``outputs/studies/<name>.db``), otherwise ``<dir>/<file name>-<name>/``: studies of one name in two
    files of one folder keep two reports."""
    check_path_name("sweep.study_name", study_name)
    file = storage_file(url)  # one folder for every spelling of the file (sqlite:///q.db?timeout=30)
    if file is None:
        return fallback
    return file.parent / (study_name if file.name == f"{study_name}.db" else f"{file.name}-{study_name}")


def study_info(path: Path) -> dict:
    """A sweep directory's ``study.json`` (written by the sweeper): ValueError naming the file when it is
    not JSON or lacks the storage or the study name."""
    try:
        info = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not a study file the sweeper wrote (not JSON: {e})") from None
    missing = [k for k in ("storage", "study_name") if not isinstance(info, dict) or k not in info]
    if missing:
        raise ValueError(f"{path} is not a study file the sweeper wrote (no {', '.join(missing)})")
    return info


def _resolve(target: str, study_name: str | None) -> tuple[str, str, Path]:
    p = Path(target)
    if p.is_dir() and (p / "study.json").is_file():
        info = study_info(p / "study.json")
        url, name = info["storage"], study_name or info["study_name"]
        return url, name, p / "report"  # where the sweep wrote it
    if p.is_file() and p.suffix == ".db":
        url = f"sqlite:///{p.resolve()}"
    elif p.is_file() and p.suffix in (".log", ".journal"):
        url = f"{JOURNAL}{p.resolve()}"
    elif "://" in target or target.startswith(JOURNAL):
        url = target
        file = target.removeprefix("sqlite:///").removeprefix(JOURNAL).split("?")[0]  # no ?timeout=...
        if file != target and file != ":memory:" and not Path(file).is_file():  # a report creates no storage
            raise FileNotFoundError(f"{target}: no such study file {file}")
    else:
        raise FileNotFoundError(
            f"{target}: give a sweep directory (with study.json), a study .db or journal .log file, "
            f"or a storage URL"
        )
    if study_name is None:
        names = study_names(open_storage(url))
        if len(names) != 1:
            raise ValueError(
                f"{target} holds studies {names}; name one: python -m navexp.sweep_report {target} NAME"
            )
        study_name = names[0]
    return url, study_name, report_dir(url, study_name, Path("outputs/studies") / study_name)


OPTIONS = ("out", "project", "entity", "wandb")
"""sweep_report's options, ``<name>=<value>`` like every navexp tool's (``--<name> <value>`` still works)."""


EPILOG = """navexp options:
  out=DIR                report directory (default: <sweep dir>/report for a sweep directory, next to
                         the study file otherwise)
  wandb=offline|online   also write the study as one W&B run (job_type study: the trials table, the
                         best trial, the plots)
  project=NAME           W&B project of that run (default navexp)
  entity=NAME            W&B entity of that run"""


def _dashed(argv: list[str]) -> list[str]:
    """``out=DIR`` -> ``--out DIR`` for argparse; the old ``--out DIR`` form passes, with a note."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in OPTIONS:
            out += [f"--{key}", value]
            continue
        if arg.startswith("--") and arg[2:].split("=")[0] in OPTIONS:
            name = arg[2:].split("=")[0]
            print(f"[navexp] --{name} is now {name}=... (the old form keeps working)", file=sys.stderr)
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(
        prog="python -m navexp.sweep_report",
        usage="python -m navexp.sweep_report TARGET [STUDY_NAME] [out=DIR] [wandb=offline|online] "
        "[project=NAME] [entity=NAME]",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("target", help="sweep directory, study .db or journal .log file, or storage URL")
    ap.add_argument("study_name", nargs="?", default=None)
    for name in ("out", "project", "entity"):  # shown as name=value in the epilog
        ap.add_argument(f"--{name}", help=argparse.SUPPRESS)
    ap.add_argument(
        "--wandb", nargs="?", const="offline", choices=("offline", "online"), help=argparse.SUPPRESS
    )
    ap.set_defaults(project="navexp")
    args = ap.parse_args(_dashed(sys.argv[1:] if argv is None else list(argv)))
    url, name, default_out = _resolve(args.target, args.study_name)
    # Workers may still be writing: the report is a snapshot, RUNNING/WAITING trials included.
    study = optuna.load_study(study_name=name, storage=open_storage(url))
    counts = {s.name: n for s in TrialState if (n := sum(t.state == s for t in study.trials))}
    print(f"study {name}: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "no trials"))
    info_objectives = None
    if Path(args.target, "study.json").is_file():
        info_objectives = study_info(Path(args.target, "study.json")).get("objectives")
    out = write_report(study, Path(args.out) if args.out else default_out, info_objectives)
    best = json.loads((out / "summary.json").read_text())
    if "best_value" in best and not math.isnan(best["best_value"]):
        print(f"best trial {best['best_trial']}: {best['best_value']:.4g} with {best['best_params']}")
    print(f"report: {out / 'report.md'}")
    if args.wandb:
        folder = log_study_run(
            study,
            out,
            json.loads((out / "summary.json").read_text())["objectives"],
            args.project,
            args.wandb,
            args.entity,
        )
        if folder is not None:
            print(f"W&B study run: {folder}")
    return out
