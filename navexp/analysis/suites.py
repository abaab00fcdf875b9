"""Running evaluation suites (``navexp.config.suites`` loads and checks them): one evaluation per
entry, the main entry's metrics at the top level of eval.json and every entry's under ``entries``, and
the scalars logged as ``Eval/<metric>``, ``Eval/<entry>/<metric>`` and
``Eval/<entry>/<family or scenario>/<metric>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from navexp.analysis.rollout import evaluate
from navexp.config.suites import entry_config, load_suite

if TYPE_CHECKING:
    from navexp.analysis.plots import Episode
    from navexp.analysis.rollout import Policy
    from navexp.task.env import NavEnv

Build = Callable[[DictConfig], "tuple[Policy, NavEnv]"]
"""An entry's config -> the policy and its evaluation env (``NavEnv(eval_env_cfg(cfg))``)."""


def evaluate_suite(
    cfg: DictConfig, suite: str | None, build: Build, record: bool = False, progress: bool = False
) -> tuple[dict, NavEnv, list[Episode]]:
    """Evaluate every entry of ``suite`` (None: the run's config alone); return the metrics (the main
    entry's at the top level, all under ``entries``), the main entry's env and its recorded episodes
    (with ``record``). ``progress``: progress lines while each entry's episodes run."""
    if not suite:
        policy, env = build(cfg)
        label = "evaluation" if progress else None
        metrics, episodes = evaluate(policy, env, int(cfg.eval.num_episodes), record=record, label=label)
        return metrics, env, episodes
    entries: dict[str, dict] = {}
    main: tuple[NavEnv, list[Episode]] | None = None
    for i, entry in enumerate(load_suite(suite, str(cfg.env.get("name", "")) or None).entries):
        ecfg = entry_config(cfg, entry)
        policy, env = build(ecfg)
        label = f"suite {suite}, {entry.name}" if progress else None
        n = int(ecfg.eval.num_episodes)
        metrics, episodes = evaluate(policy, env, n, record=record and i == 0, label=label)
        entries[str(entry.name)] = metrics
        if main is None:
            main = (env, episodes)
        spl = "-" if metrics["spl"] is None else f"{metrics['spl']:.3f}"
        print(
            f"[navexp] suite {suite}, {entry.name}: success {metrics['success_rate']:.1%} of "
            f"{metrics['num_episodes']} episodes ({metrics['num_distinct_cases']} distinct cases), SPL {spl}",
            flush=True,
        )
    first = next(iter(entries))
    return {**entries[first], "suite_main_entry": first, "entries": entries}, main[0], main[1]


def summary(metrics: dict) -> str:
    """A few lines for the console: the rates with the success rate's 95 % interval, SPL and the BARN
    score, and the success rate per map family and per suite entry when there are several (the whole
    record is in the JSON file)."""
    lo, hi = metrics.get("ci95", {}).get("success_rate", (float("nan"), float("nan")))
    spl, barn = metrics.get("spl"), metrics.get("barn_score")
    main = f"main entry {metrics['suite_main_entry']}, " if metrics.get("suite_main_entry") else ""
    lines = [
        f"[navexp] {main}{metrics['num_episodes']} episodes: success {metrics['success_rate']:.1%} "
        f"(95 % interval {lo:.1%}-{hi:.1%}), collision {metrics['collision_rate']:.1%}, "
        f"timeout {metrics['timeout_rate']:.1%}, out of bounds {metrics['out_of_bounds_rate']:.1%}"
        + ("" if spl is None else f"; SPL {spl:.3f}")
        + ("" if barn is None else f", BARN score {barn:.3f}")
    ]
    for title, parts in (("per family", metrics.get("by_family")), ("per entry", metrics.get("entries"))):
        if parts and len(parts) > 1:
            text = ", ".join(f"{k} {v['success_rate']:.1%} ({v['num_episodes']})" for k, v in parts.items())
            lines.append(f"[navexp] success {title} (episodes): {text}")
    return "\n".join(lines)


def breakdown(metrics: dict) -> dict[str, dict]:
    """The groups worth their own tags: scenario entries, else families when more than one."""
    if "by_scenario" in metrics:
        return metrics["by_scenario"]
    fams = metrics.get("by_family") or {}
    return fams if len(fams) > 1 else {}


def eval_scalars(metrics: dict, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """TensorBoard/W&B scalars of an evaluation: ``Eval/<metric>`` of the main entry, then per entry
    ``Eval/<entry>/<metric>`` and its groups ``Eval/<entry>/<group>/<metric>`` (without a suite: the
    main evaluation's groups ``Eval/<group>/<metric>``). Keys in ``skip`` (what was evaluated) are left
    out."""
    out = _numbers("Eval/", metrics, skip)
    entries = metrics.get("entries")
    scopes = entries.items() if entries else [("", metrics)]
    for name, m in scopes:
        prefix = f"Eval/{name}/" if name else "Eval/"
        if name:
            out.update(_numbers(prefix, m, skip))
        for group, gm in breakdown(m).items():
            out.update(_numbers(f"{prefix}{group}/", gm, skip))
    return out


def _numbers(prefix: str, metrics: dict, skip: tuple[str, ...]) -> dict[str, float]:
    return {
        prefix + k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in skip
    }
