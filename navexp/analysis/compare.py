"""Results across runs and seeds: find finished runs under some folders, group them, aggregate.

A run is a folder with ``config.yaml`` (``navexp.train`` writes it first); it is finished when it
also holds ``eval.json``. Runs group by their command-line overrides other than ``seed`` (Hydra's
``.hydra/overrides.yaml``; sweep trials: their sampled parameters too), or by the values of chosen
config keys (``by=ppo.algorithm.clip_param,env``). Per group: ``n_runs``; the success rate's mean, its 95 %
interval and its interquartile mean (IQM); the means of the other evaluation metrics and of every
suite entry's success rate. The success rate is eval.json's (the suite's main entry) or, with
``entry=``, that of one suite entry.

Intervals follow Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021),
as ``rliable`` computes them: a bootstrap over runs (one task, so the stratified bootstrap is the
plain one; ``scipy.stats.bootstrap``, percentile method, 10,000 resamples, a fixed seed) of the mean;
the IQM is the mean of the middle 50 % of runs (``scipy.stats.trim_mean(x, 0.25)``). A group of one
run reports that run's own Wilson interval over its evaluation episodes (eval.json). rliable itself is
not used: it imports only with pandas < 3 here.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from scipy import stats  # noqa: E402

from navexp.config.aliases import translate_key, translate_overrides  # noqa: E402
from navexp.learn.ppo_schema import nest_ppo  # noqa: E402
from navexp.paths import overrides_record  # noqa: E402

METRICS = ("collision_rate", "timeout_rate", "spl", "barn_score")
"""Evaluation metrics averaged per group besides the success rate (eval.json top level)."""
COLUMNS = (
    "n_runs",
    "success_rate_mean",
    "success_rate_ci95_low",
    "success_rate_ci95_high",
    "success_rate_iqm",
)
IGNORED = (
    "seed",
    "hydra.",
    "hydra/",
    "resume",
    "experiment_name",
    "sweep.",
    "logger=",
    "logger.",
    "env.device",
)
"""Overrides that never tell groups apart: the seed, Hydra's own settings, where a run lives and logs,
what a sweeper adds to each trial (its id, number, study, W&B name) and the device it ran on."""


@dataclass
class Run:
    """One run directory and what it recorded."""

    path: Path
    overrides: list[str]
    config: Any
    metrics: dict | None = None
    """eval.json (None: the run has not finished)."""
    evaluation: Path | None = None
    """The evaluation file read (``find_runs``)."""


@dataclass
class Group:
    """Runs that share the grouping values."""

    key: dict[str, str]
    runs: list[Run] = field(default_factory=list)


def find_runs(dirs: list[str | Path], evaluation: str = "eval.json") -> list[Run]:
    """Every run directory (holding config.yaml) under ``dirs``, in path order, with the metrics of
    its ``evaluation`` file: ``eval.json`` (the final evaluation), or a glob in the run directory such as
    ``eval_*suite-ood*.json`` for a later ``navexp.evaluate`` (several matches: ``evaluation_file``).
    Each run counts once however the folders overlap (the same folder twice, a run and its parent)."""
    check_evaluation_glob(evaluation)
    runs, seen = [], set()
    for d in dirs:
        root = Path(d)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such directory")
        configs = sorted(p for p in root.rglob("config.yaml") if ".hydra" not in p.relative_to(root).parts)
        for cfg_path in configs:
            run_dir = cfg_path.parent
            if run_dir.resolve() in seen or _inside_run(run_dir, root):
                continue  # a folder given twice, or inside another: each run counts once
            seen.add(run_dir.resolve())
            path = evaluation_file(run_dir, evaluation)
            metrics = read_evaluation(path) if path is not None else None
            runs.append(Run(run_dir, _overrides(run_dir), _load_config(cfg_path), metrics, path))
    return runs


def check_evaluation_glob(pattern: str) -> None:
    """``eval=`` is a pattern inside each run directory (``segments/1/eval.json`` too), not a path
    outside it."""
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise ValueError(
            f"eval={pattern!r}: give a file name pattern inside each run directory, not a path "
            f"(eval.json, or eval='eval_*suite-ood*.json' for navexp.evaluate ... suite=ood)"
        )


def read_evaluation(path: Path) -> dict:
    """An evaluation file's figures: a JSON object with ``success_rate``, else one error naming the file."""
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} cannot be read as an evaluation (JSON): {e}") from None
    if not isinstance(metrics, dict) or "success_rate" not in metrics:
        raise ValueError(
            f"{path} is not an evaluation of navexp.train or navexp.evaluate (no success_rate); remove it, "
            f"or choose other files with eval=GLOB"
        )
    return metrics


def _load_config(path: Path) -> Any:
    """A run's config.yaml in today's shape (a run from before the ``ppo`` sections: its flat keys
    moved into them, so ``by=ppo.algorithm.clip_param`` finds old and new runs alike)."""
    try:
        config = OmegaConf.load(path)
    except (OSError, yaml.YAMLError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path} cannot be read as a run's config: {first}") from None
    if OmegaConf.is_dict(config.get("ppo")):
        config.ppo = nest_ppo(OmegaConf.to_container(config.ppo, resolve=False))
    return config


def _inside_run(d: Path, root: Path) -> bool:
    """A config.yaml below another run's directory (at or below ``root``) is that run's, not a run: an
    earlier segment (``<run>/segments/<k>/``, also when ``root`` is the segments folder) or W&B's copy
    (``<run>/wandb/.../files/config.yaml``)."""
    if d.parent.name == "segments" and (d.parent.parent / "config.yaml").is_file():
        return True
    rel = d.relative_to(root).parts
    above = [root.joinpath(*rel[:i]) for i in range(len(rel))]  # root, then each folder down to d's parent
    return any((folder / "config.yaml").is_file() for folder in above)


def evaluation_file(run_dir: Path, pattern: str) -> Path | None:
    """The run's file matching ``pattern``; of several, one that scores the run's policy (what
    ``navexp.evaluate checkpoint=<run>`` reads: its average with ``ppo.average_checkpoints``), the
    newest by modification time among those (an evaluation of another checkpoint, such as a single
    ``model_<it>.pt``, only when none scores the policy)."""
    matches = [p for p in run_dir.glob(pattern) if p.is_file()]
    if len(matches) <= 1:
        return matches[0] if matches else None
    from navexp.learn.checkpoint import resolve_policy  # torch: only where a choice is to be made

    try:
        policy = resolve_policy(run_dir).name
    except FileNotFoundError:  # no checkpoint left: the newest file
        policy = None

    def rank(p: Path) -> tuple[bool, int]:
        try:
            scored = Path(str(json.loads(p.read_text()).get("checkpoint") or "")).name
        except (OSError, ValueError):
            scored = ""
        return scored == policy, p.stat().st_mtime_ns

    best = max(matches, key=rank)
    if policy is not None and not rank(best)[0]:
        print(
            f"[navexp] {run_dir}: none of {sorted(p.name for p in matches)} scores the run's policy "
            f"{policy}; reading the newest, {best.name}",
            file=sys.stderr,
        )
    return best


def _overrides(run_dir: Path) -> list[str]:
    """The run's command-line overrides (Hydra's latest record: a resume's, which repeats the run's
    own), with today's key names, without those that never tell groups apart."""
    path = overrides_record(run_dir)
    given = translate_overrides([str(o) for o in yaml.safe_load(path.read_text()) or []] if path else [])
    return sorted(o for o in given if not o.lstrip("+~").startswith(IGNORED))


def varying_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between the runs (dotted, sorted): what ``by=`` can name."""
    flat = [_flatten(OmegaConf.to_container(r.config, resolve=False)) for r in runs]
    keys = set().union(*flat) if flat else set()
    return sorted(k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def group_runs(runs: list[Run], by: list[str] | None = None) -> list[Group]:
    """Group finished runs by their overrides other than the seed, or by the config keys ``by``.

    A ``by`` key missing from a run's config fails naming it and the keys that vary across the runs.
    """
    groups: dict[tuple, Group] = {}
    for run in runs:
        if by:
            key, typed = {}, {}
            for k in by:
                value = OmegaConf.select(run.config, k, default="__missing__")
                if value == "__missing__":
                    raise KeyError(
                        f"by={k!r} is not a config key of {run.path}; keys that vary: {varying_keys(runs)}"
                    )
                plain = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
                typed[k] = json.dumps(plain)  # groups apart "1" and 1
                key[k] = plain if isinstance(plain, str) else typed[k]  # written traps, not "traps"
        else:
            key = typed = dict(o.lstrip("+").split("=", 1) for o in run.overrides if "=" in o)
        groups.setdefault(tuple(sorted(typed.items())), Group(key)).runs.append(run)
    return list(groups.values())


def success_interval(rates: np.ndarray, single: dict | None = None) -> tuple[float, float]:
    """95 % interval of the mean success rate over runs (bootstrap); one run: its Wilson interval."""
    if len(rates) == 1:
        lo, hi = ((single or {}).get("ci95") or {}).get("success_rate") or [math.nan, math.nan]
        return float(lo), float(hi)
    if np.ptp(rates) == 0:
        return float(rates[0]), float(rates[0])
    res = stats.bootstrap(
        (rates,), np.mean, confidence_level=0.95, n_resamples=10_000, method="percentile", random_state=0
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(group: Group) -> dict[str, Any]:
    """One table row: the grouping values, n_runs, success mean/interval/IQM, the other metrics' means."""
    done = [r.metrics for r in group.runs]
    rates = np.array([m["success_rate"] for m in done], dtype=float)
    lo, hi = success_interval(rates, done[0])
    row: dict[str, Any] = dict(group.key)
    row.update(
        n_runs=len(done),
        success_rate_mean=float(rates.mean()),
        success_rate_ci95_low=lo,
        success_rate_ci95_high=hi,
        success_rate_iqm=float(stats.trim_mean(rates, 0.25)),
    )
    for name in METRICS:
        values = [m.get(name) for m in done if m.get(name) is not None]
        row[f"{name}_mean"] = float(np.mean(values)) if values else None
    for entry in sorted({e for m in done for e in (m.get("entries") or {})}):
        values = [m["entries"][entry]["success_rate"] for m in done if entry in (m.get("entries") or {})]
        row[f"{entry}.success_rate_mean"] = float(np.mean(values))
    return row


@dataclass
class Comparison:
    """The table of a comparison and what it rests on."""

    rows: list[dict]
    """One row per group (``summarize``)."""
    rates: list[np.ndarray]
    """Per group (same order), each run's success rate."""
    unfinished: list[Path]
    """Run directories without eval.json (listed, never silently dropped)."""


def entry_metrics(run: Run, entry: str) -> dict:
    """A finished run's figures for one suite entry: eval.json's ``entries[entry]`` (the same fields as
    its top level, which holds the suite's main entry), keeping ``entries`` for the per-entry means."""
    entries = run.metrics.get("entries") or {}
    if entry not in entries:
        has = f"its entries: {sorted(entries)}" if entries else "it has none (evaluated without a suite)"
        raise KeyError(f"entry={entry!r} is not an entry of {run.path}'s evaluation; {has}")
    return {**entries[entry], "entries": entries}


def _scored(run: Run) -> str:
    """What a run's evaluation file scores at its top level: the suite and its main entry."""
    suite = run.metrics.get("suite")
    if not suite:
        return "the run's own env (no suite)"
    return f"suite {suite}, main entry {run.metrics.get('suite_main_entry')}"


def check_one_main_entry(runs: list[Run]) -> None:
    """The success rates compared must score one thing: evaluations of different suites (their main
    entries: the trap mix against the held-out dead ends), in one group or side by side, are refused,
    naming two runs and their files."""
    seen: dict[str, Run] = {}
    for run in runs:
        seen.setdefault(_scored(run), run)
    if len(seen) > 1:
        (a, ra), (b, rb) = list(seen.items())[:2]
        raise ValueError(
            "the runs compared mix evaluations of different suites: "
            f"{ra.evaluation} scores {a}, {rb.evaluation} scores {b}; compare one suite's files "
            f"(eval='eval_*suite-<name>*.json', or eval.json of runs evaluated alike) or one entry "
            f"(entry=NAME)"
        )


def compare(
    dirs: list[str | Path],
    by: list[str] | None = None,
    evaluation: str = "eval.json",
    entry: str | None = None,
) -> Comparison:
    """Group and aggregate the finished runs under ``dirs`` (those with an ``evaluation`` file, see
    ``find_runs``); list the unfinished ones. ``entry``: the success rate, its interval, IQM and the
    other metrics are those of that suite entry, not of the suite's main entry (a column ``entry``
    says so)."""
    by = [translate_key(k) for k in by] if by else by  # old names (ppo.clip_param) are today's
    runs = find_runs(dirs, evaluation)
    if not runs:
        raise FileNotFoundError(f"no run directories (with config.yaml) under {[str(d) for d in dirs]}")
    finished = [r for r in runs if r.metrics is not None]
    if entry:
        for run in finished:
            run.metrics = entry_metrics(run, entry)
    if by:  # check the keys on every run, also where none finished yet
        group_runs(runs, by)
    groups = group_runs(finished, by)
    if not entry:
        check_one_main_entry(finished)
    rates = [np.array([r.metrics["success_rate"] for r in g.runs], dtype=float) for g in groups]
    rows = [({"entry": entry} if entry else {}) | summarize(g) for g in groups]
    return Comparison(rows, rates, [r.path for r in runs if r.metrics is None])


def columns(rows: list[dict]) -> list[str]:
    """The grouping keys first, then ``COLUMNS``, then the other metrics, in first-seen order."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    head = [k for k in keys if k not in COLUMNS and not k.endswith("_mean")]
    return head + list(COLUMNS) + [k for k in keys if k.endswith("_mean") and k not in COLUMNS]


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def markdown(rows: list[dict]) -> str:
    """The table as Markdown."""
    cols = columns(rows)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def check_table_path(out: Path) -> None:
    """``out=`` can be written: a ``.csv`` or ``.md`` file in a folder that exists or can be made and is
    writable (checked before any run is read, so a bad path costs nothing and replaces nothing)."""
    if out.is_dir():
        raise ValueError(f"out={str(out)!r} is a directory; give a .csv or .md file")
    if out.suffix not in (".csv", ".md"):
        raise ValueError(f"out={str(out)!r}: give a .csv or .md file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"out={str(out)!r}: its folder cannot be made ({e.strerror})") from None
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"out={str(out)!r} is not writable")


def write_table(rows: list[dict], out: Path) -> Path:
    """``out`` as CSV (the column names of ``columns``) or, for ``.md``, Markdown."""
    check_table_path(out)
    if out.suffix == ".md":
        text = markdown(rows) + "\n"
    else:
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=columns(rows))
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    try:
        out.write_text(text)
    except OSError as e:
        raise ValueError(f"out={str(out)!r} cannot be written: {e.strerror}") from None
    return out


def group_label(row: dict) -> str:
    """A group's name in plots: its grouping values (``all runs`` when nothing varies)."""
    keys = [k for k in columns([row]) if k not in COLUMNS and not k.endswith("_mean")]
    return " ".join(f"{k}={row[k]}" for k in keys) or "all runs"


def plot(comparison: Comparison, stem: Path) -> list[Path]:
    """``<stem>_success.png`` (each group's mean success with its 95 % interval, runs as dots) and
    ``<stem>_profile.png`` (performance profile: the fraction of a group's runs with success >= tau)."""
    labels = [group_label(r) for r in comparison.rows]
    wrapped = [textwrap.fill(label, 48) for label in labels]
    lines = sum(w.count("\n") + 1 for w in wrapped)
    fig, ax = plt.subplots(figsize=(7, 0.25 * lines + 0.35 * len(labels) + 1.5))
    for i, (row, rates) in enumerate(zip(comparison.rows, comparison.rates, strict=True)):
        lo, hi = row["success_rate_ci95_low"], row["success_rate_ci95_high"]
        ax.plot([lo, hi], [i, i], color="C0", lw=3, alpha=0.5)
        ax.plot(row["success_rate_mean"], i, "o", color="C0")
        ax.plot(rates, [i] * len(rates), "|", color="k", ms=10)
    ax.set_yticks(range(len(labels)), wrapped)
    ax.set_xlabel("success rate (mean, 95 % interval; | = one run)")
    ax.set_xlim(0, 1.02)
    success = stem.with_name(stem.name + "_success.png")
    # bbox_inches="tight" grows the image to the labels (tight_layout warns and clips long group names)
    fig.savefig(success, dpi=90, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    tau = np.linspace(0, 1, 201)
    for label, rates in zip(wrapped, comparison.rates, strict=True):
        ax.step(tau, [(rates >= t).mean() for t in tau], where="post", label=f"{label} ({len(rates)} runs)")
    ax.set_xlabel("success rate tau")
    ax.set_ylabel("fraction of runs with success >= tau")
    ax.legend(fontsize=7)
    profile = stem.with_name(stem.name + "_profile.png")
    fig.savefig(profile, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [success, profile]
