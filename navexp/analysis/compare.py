"""Results across runs and seeds: find finished runs under some folders, group them, aggregate.

A run is a folder with ``config.yaml`` (``navexp.train`` writes it first); it is finished when it
also holds ``eval.json`` (``navexp.analysis.run_records``; a run whose files cannot be read is listed as
unreadable and left out). Runs group by their resolved config, the seed and the other neutral keys
aside (``navexp.analysis.run_groups``: the columns are the choices and keys that differ; what every
run's command line sets alike is said once above the table), or by the values of chosen config keys
(``by=ppo.algorithm.clip_param,env``). Per group: ``n_runs``; the success rate's mean, its 95 %
interval and its interquartile mean (IQM, from 4 runs on); the means of the other evaluation metrics
and of every suite entry's success rate. The success rate is eval.json's (the suite's main entry) or,
with ``entry=``, that of one suite entry. The printed and written tables give rates in percent.

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
import math
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from scipy import stats  # noqa: E402

from navexp.analysis.run_groups import Group, group_runs  # noqa: E402
from navexp.analysis.run_records import Run, Unreadable, find_runs  # noqa: E402
from navexp.config.aliases import translate_key  # noqa: E402

METRICS = ("collision_rate", "timeout_rate", "spl", "barn_score")
"""Evaluation metrics averaged per group besides the success rate (eval.json top level)."""
MOVING_METRICS = ("moving_collision_rate", "mean_wait_s")
"""Metrics of moving obstacles (issue 50), averaged per group only when a compared run had moving
obstacles (``had_moving``): a table of static runs keeps its columns."""
COLUMNS = (
    "n_runs",
    "success_rate_mean",
    "success_rate_ci95_low",
    "success_rate_ci95_high",
    "success_rate_iqm",
)
IQM_MIN_RUNS = 4
"""Below 4 runs ``trim_mean(x, 0.25)`` trims nothing (the IQM would be the mean): no IQM is given."""
N_RESAMPLES = 10_000
LEGEND = (
    "rates in % of held-out episodes; ci95: 95 % interval of the mean over a group's runs (percentile "
    f"bootstrap, {N_RESAMPLES:,} resamples; one run: its Wilson interval over its episodes); iqm: "
    f"interquartile mean, the mean of the middle 50 % of runs (from {IQM_MIN_RUNS} runs; '-' below); "
    "spl, barn_score: 0-1"
)
"""The line under every table: what its figures are."""
MOVING_LEGEND = "; moving_collision_rate: contacts with moving obstacles; mean_wait_s: seconds waited"
"""Added to the legend when the table has the moving obstacles' columns."""


def success_interval(rates: np.ndarray, single: dict | None = None) -> tuple[float, float]:
    """95 % interval of the mean success rate over runs (bootstrap); one run: its Wilson interval
    (eval.json's ``ci95.success_rate``; none or a malformed one: no interval)."""
    if len(rates) == 1:
        pair = ((single or {}).get("ci95") or {}).get("success_rate") if isinstance(single, dict) else None
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int | float) for v in pair):
            return float(pair[0]), float(pair[1])
        return math.nan, math.nan
    if np.ptp(rates) == 0:
        return float(rates[0]), float(rates[0])
    res = stats.bootstrap(
        (rates,), np.mean, confidence_level=0.95, n_resamples=N_RESAMPLES, method="percentile", random_state=0
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def had_moving(run: Run) -> bool:
    """Whether a finished run was evaluated with moving obstacles: its config compiles moving slots
    (``env.dynamic``), or its figures count a moving collision (a suite entry with moving obstacles).
    eval.json of a static run holds ``moving_collision_rate`` 0 and a ``mean_wait_s`` too, so the keys
    alone do not tell."""
    slots = sum(
        int(OmegaConf.select(run.config, f"env.dynamic.{k}", default=0) or 0)
        for k in ("cylinder_slots", "box_slots")
    )
    rate = (run.metrics or {}).get("moving_collision_rate")
    return slots > 0 or (isinstance(rate, int | float) and rate > 0)


def summarize(group: Group, moving: bool = False) -> dict[str, Any]:
    """One table row: the grouping values, n_runs, success mean/interval/IQM, the other metrics' means
    (with ``moving``, those of ``MOVING_METRICS`` too)."""
    done = [r.metrics for r in group.runs]
    rates = np.array([m["success_rate"] for m in done], dtype=float)
    lo, hi = success_interval(rates, done[0])
    row: dict[str, Any] = dict(group.key)
    row.update(
        n_runs=len(done),
        success_rate_mean=float(rates.mean()),
        success_rate_ci95_low=lo,
        success_rate_ci95_high=hi,
        success_rate_iqm=float(stats.trim_mean(rates, 0.25)) if len(rates) >= IQM_MIN_RUNS else None,
    )
    for name in METRICS + (MOVING_METRICS if moving else ()):
        values = [m.get(name) for m in done if isinstance(m.get(name), int | float)]
        row[f"{name}_mean"] = float(np.mean(values)) if values else None
    for entry in sorted({e for m in done for e in (m.get("entries") or {})}):
        values = [m["entries"][entry]["success_rate"] for m in done if entry in (m.get("entries") or {})]
        row[f"{entry}.success_rate_mean"] = float(np.mean(values))
    return row


@dataclass
class Comparison:
    """The table of a comparison and what it rests on."""

    rows: list[dict]
    """One row per group (``summarize``); rates as fractions (the printed and written tables: percent)."""
    rates: list[np.ndarray]
    """Per group (same order), each run's success rate."""
    unfinished: list[Path]
    """Run directories without eval.json (listed, never silently dropped)."""
    unreadable: list[Unreadable] = field(default_factory=list)
    """Runs left out because a file of theirs cannot be read: the file and what is wrong."""
    shared: dict[str, str] = field(default_factory=dict)
    """Settings every compared run's command line has alike (said once above the table)."""
    hidden: list[str] = field(default_factory=list)
    """Config keys that differ between groups but follow from a column (``env=traps``: its env keys)."""


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
    ``find_runs``); list the unfinished ones and the unreadable ones. ``entry``: the success rate, its
    interval, IQM and the other metrics are those of that suite entry, not of the suite's main entry (a
    column ``entry`` says so)."""
    by = [translate_key(k) for k in by] if by else by  # old names (ppo.clip_param) are today's
    found = find_runs(dirs, evaluation)
    runs = found.runs
    if not runs and not found.unreadable:
        raise FileNotFoundError(f"no run directories (with config.yaml) under {[str(d) for d in dirs]}")
    finished = [r for r in runs if r.metrics is not None]
    if entry:
        for run in finished:
            run.metrics = entry_metrics(run, entry)
    if by:  # check the keys on every run, also where none finished yet
        group_runs(runs, by)
    grouping = group_runs(finished, by)
    if not entry:
        check_one_main_entry(finished)
    groups = grouping.groups
    rates = [np.array([r.metrics["success_rate"] for r in g.runs], dtype=float) for g in groups]
    moving = any(had_moving(r) for r in finished)
    rows = [({"entry": entry} if entry else {}) | summarize(g, moving) for g in groups]
    unfinished = [r.path for r in runs if r.metrics is None]
    return Comparison(rows, rates, unfinished, found.unreadable, grouping.shared, grouping.hidden)


def columns(rows: list[dict]) -> list[str]:
    """The grouping keys first, then ``COLUMNS``, then the other metrics, in first-seen order."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    head = [k for k in keys if k not in COLUMNS and not k.endswith("_mean")]
    return head + list(COLUMNS) + [k for k in keys if k.endswith("_mean") and k not in COLUMNS]


def is_rate(column: str) -> bool:
    """A column holding a rate (success, collision, timeout: printed and written in percent)."""
    name = column.rsplit(".", 1)[-1]
    return name.startswith(("success_rate", "collision_rate", "timeout_rate", "moving_collision_rate"))


def table_rows(rows: list[dict]) -> list[dict]:
    """The rows as the tables give them: rates in percent (4 decimals), other figures as they are."""
    return [
        {k: round(100 * v, 4) if is_rate(k) and isinstance(v, float) else v for k, v in r.items()}
        for r in rows
    ]


def _fmt(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if is_rate(column) else f"{value:.3f}"
    return str(value)


def markdown(rows: list[dict]) -> str:
    """The table as Markdown (rows as ``table_rows`` gives them: rates in percent)."""
    cols = columns(rows)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(c, r.get(c)) for c in cols) + " |" for r in table_rows(rows)]
    return "\n".join(lines)


def report(comparison: Comparison) -> str:
    """What ``navexp.compare`` prints and writes to a ``.md`` table: the settings every run shares (once),
    the table, its legend and the keys that differ with its columns."""
    parts = []
    if comparison.shared:
        shared = " ".join(f"{k}={v}" for k, v in comparison.shared.items())
        parts.append(f"same in every run compared: {shared}")
    moving = any(f"{MOVING_METRICS[0]}_mean" in r for r in comparison.rows)
    parts += [markdown(comparison.rows), LEGEND + (MOVING_LEGEND if moving else "")]
    if comparison.hidden:
        keys = comparison.hidden
        more = f" and {len(keys) - 6} more" if len(keys) > 6 else ""
        parts.append(f"also differing, with the columns above: {', '.join(keys[:6])}{more}")
    return "\n\n".join(parts)


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


def write_table(comparison: Comparison, out: Path) -> Path:
    """``out`` as CSV (the column names of ``columns``, rates in percent) or, for ``.md``, the report
    (``report``: the shared settings, the table, its legend)."""
    check_table_path(out)
    rows = comparison.rows
    if out.suffix == ".md":
        text = report(comparison) + "\n"
    else:
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=columns(rows))
        writer.writeheader()
        writer.writerows(table_rows(rows))
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
        ax.plot([100 * lo, 100 * hi], [i, i], color="C0", lw=3, alpha=0.5)
        ax.plot(100 * row["success_rate_mean"], i, "o", color="C0")
        ax.plot(100 * rates, [i] * len(rates), "|", color="k", ms=10)
    ax.set_yticks(range(len(labels)), wrapped)
    ax.set_xlabel("success rate (%): mean, 95 % interval (bootstrap over runs; one run: Wilson); | = a run")
    ax.set_xlim(0, 102)
    success = stem.with_name(stem.name + "_success.png")
    # bbox_inches="tight" grows the image to the labels (tight_layout warns and clips long group names)
    fig.savefig(success, dpi=90, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    tau = np.linspace(0, 1, 201)
    for label, rates in zip(wrapped, comparison.rates, strict=True):
        ax.step(
            100 * tau, [(rates >= t).mean() for t in tau], where="post", label=f"{label} ({len(rates)} runs)"
        )
    ax.set_xlabel("success rate tau (%)")
    ax.set_ylabel("fraction of runs with success >= tau")
    ax.legend(fontsize=7)
    profile = stem.with_name(stem.name + "_profile.png")
    fig.savefig(profile, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return [success, profile]
