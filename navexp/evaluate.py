"""Evaluation: N episodes on held-out layouts, auto_reset off, deterministic actions, each counted once.

``python -m navexp.evaluate checkpoint=<run dir or .pt> [eval.num_episodes=...] [env=...] [out=...]``
scores a checkpoint. Without ``out=`` it writes ``eval_<model>_<env>_<layout seed>[_<overrides hash>].json``
next to the checkpoint, never the run's own ``eval.json``, and refuses to replace a file that holds a
different evaluation. Every result records the checkpoint, the overrides, the scenario file and the
layout seed. The output location is checked before any episode runs, and the metrics are printed
before they are written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.state import COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT

RATES = {
    "success_rate": SUCCESS,
    "collision_rate": COLLISION,
    "timeout_rate": TIME_OUT,
    "out_of_bounds_rate": OUT_OF_BOUNDS,
}


def wilson_interval(k: int, n: int, z: float = 1.96) -> list[float]:
    """95 % Wilson score interval for k successes in n trials."""
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, centre - half), min(1.0, centre + half)]


def eval_env_cfg(cfg: DictConfig) -> DictConfig:
    """The training config with evaluation settings: held-out layouts, auto_reset off, eval world count."""
    cfg = cfg.copy()
    n_ep = int(cfg.eval.num_episodes)
    if n_ep < 1:
        raise ValueError(f"eval.num_episodes={n_ep} is invalid; allowed: an integer >= 1")
    n = int(cfg.eval.num_envs) or min(n_ep, int(cfg.env.num_envs))
    with open_dict(cfg):
        cfg.env.num_envs = n
        cfg.env.auto_reset = False
        cfg.env.layout_seed_offset = int(cfg.eval.layout_seed_offset)
        if "maps" in cfg.env:  # hashed layout ids: the evaluation seed range, never a training one
            cfg.env.maps.split = "eval"
    return cfg


@torch.inference_mode()
def run_episodes(
    policy, env, total: int, on_round=None, on_step=None
) -> tuple[list[int], list[float], list[float]]:
    """Roll ``policy`` (obs TensorDict -> actions) out for ``total`` episodes on an ``auto_reset=False`` env.

    Every world runs one episode per round and is held when it ends; the last round only counts its
    first ``remaining`` worlds, so each episode is counted exactly once. ``on_round(env)`` runs after
    each round's reset and ``on_step(env, active)`` after each step (for recording). Returns the end
    reason, duration (s) and path length (m) of each episode.
    """
    reasons, times, paths = [], [], []
    first_round = True
    while len(reasons) < total:
        obs = env.get_observations() if first_round else env.reset()
        first_round = False
        if on_round is not None:
            on_round(env)
        n = env.num_envs
        path = torch.zeros(n, device=env.device)
        steps = torch.zeros(n, dtype=torch.long, device=env.device)
        for _ in range(env.max_episode_length + 1):
            active = ~env.held
            prev = env.state.pos_xy.clone()
            obs, _, _, _ = env.step(policy(obs))
            path += (env.state.pos_xy - prev).norm(dim=-1) * active
            steps += active.long()
            if on_step is not None:
                on_step(env, active)
            if bool(env.held.all()):
                break
        take = min(n, total - len(reasons))
        reasons += env.state.reason[:take].tolist()
        times += (steps[:take].float() * env.control_dt).tolist()
        paths += path[:take].tolist()
    return reasons, times, paths


def evaluate_policy(policy, cfg: DictConfig, env=None) -> dict:
    """Score ``policy`` over ``cfg.eval.num_episodes`` held-out episodes (see run_episodes)."""
    from navexp.env import NavEnv

    cfg = eval_env_cfg(cfg)
    env = env or NavEnv(cfg)
    return summarize(*run_episodes(policy, env, int(cfg.eval.num_episodes)))


def summarize(reasons: list[int], times: list[float], paths: list[float]) -> dict:
    """Rates (summing to 1), Wilson 95 % intervals, and time/path statistics of successful episodes."""
    n = len(reasons)
    out: dict = {"num_episodes": n}
    counts = {name: sum(r == code for r in reasons) for name, code in RATES.items()}
    unknown = n - sum(counts.values())
    if unknown:
        raise RuntimeError(f"{unknown} evaluation episodes ended without a reason; evaluation is broken")
    for name, k in counts.items():
        out[name] = k / n
    out["ci95"] = {name: wilson_interval(k, n) for name, k in counts.items()}
    ok = [i for i, r in enumerate(reasons) if r == SUCCESS]
    out["mean_time_to_goal_s"] = sum(times[i] for i in ok) / len(ok) if ok else None
    out["mean_path_length_m"] = sum(paths[i] for i in ok) / len(ok) if ok else None
    return out


def build_actor(ckpt: dict, cfg: DictConfig, env):
    """rsl_rl's own actor MLPModel with the checkpoint's weights and normalizer."""
    from rsl_rl.utils import resolve_class

    from navexp.rl_cfg import build_train_cfg

    train_cfg = build_train_cfg(cfg)
    actor_class, actor_cfg = resolve_class(train_cfg["actor"])
    actor = actor_class(
        env.get_observations(), train_cfg["obs_groups"], "actor", env.num_actions, **actor_cfg
    )
    actor.load_state_dict(ckpt["actor_state_dict"])
    return actor.to(env.device).eval()


def load_run_config(ckpt: dict, overrides: list[str]) -> DictConfig:
    """The checkpoint's training config, with the command line's group choices and keys applied."""
    from navexp.api import compose_config

    composed = compose_config(overrides)
    stored = (ckpt.get("infos") or {}).get("config")
    if stored is None:
        return composed
    cfg = OmegaConf.create(stored)
    with open_dict(cfg):
        for o in overrides:
            key = o.split("=", 1)[0].lstrip("+~")
            OmegaConf.update(cfg, key, OmegaConf.select(composed, key), merge=False)
    return cfg


def evaluation_record(cfg: DictConfig, checkpoint: str | None, overrides: list[str]) -> dict:
    """What an evaluation ran on: the checkpoint, the overrides, the scenario file and the layout seed."""
    from navexp.api import resolve_scenario_path

    scen = cfg.env.get("scenarios")
    return {
        "checkpoint": checkpoint,
        "overrides": list(overrides),
        "scenario_file": str(resolve_scenario_path(str(scen)).resolve()) if scen else None,
        "layout_seed": int(cfg.seed) + int(cfg.eval.layout_seed_offset),
    }


RECORD_KEYS = ("checkpoint", "overrides", "scenario_file", "layout_seed")


def default_output(ckpt_path: str, cfg: DictConfig, overrides: list[str]) -> Path:
    """``eval_<model>_<env>_<layout seed>[_<hash of the other overrides>].json`` next to the checkpoint."""
    env = next((o.split("=", 1)[1] for o in overrides if o.startswith("env=")), "run")
    if cfg.env.get("scenarios"):
        env += "-" + Path(str(cfg.env.scenarios)).stem
    rest = sorted(o for o in overrides if not o.startswith("env="))
    tag = "_" + hashlib.sha1("\n".join(rest).encode()).hexdigest()[:8] if rest else ""
    seed = int(cfg.seed) + int(cfg.eval.layout_seed_offset)
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in env)
    ckpt = Path(ckpt_path)
    return ckpt.parent / f"eval_{ckpt.stem}_{safe}_{seed}{tag}.json"


def check_output(out: Path, record: dict, explicit: bool) -> None:
    """Before any episode runs: the output's folder is writable, and a default-named file that holds a
    different evaluation is never replaced (an ``out=`` the user gave is theirs to overwrite)."""
    if not explicit and out.is_file():
        try:
            old = json.loads(out.read_text())
        except (OSError, ValueError):
            old = {}
        if any(old.get(k) != record[k] for k in RECORD_KEYS):
            raise FileExistsError(
                f"{out} already holds another evaluation (checkpoint {old.get('checkpoint')}, overrides "
                f"{old.get('overrides')}); nothing was run. Pass out=<path> to write elsewhere."
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out.parent, prefix=".write_probe_")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OSError(e.errno, f"out={out}: cannot write there ({e.strerror or e}); nothing was run") from e


def main(argv: list[str] | None = None) -> dict:
    """CLI: ``checkpoint=<path>`` plus Hydra-style overrides; prints and writes eval.json."""
    from navexp.checkpoint import check_compatible, load_checkpoint, write_atomic
    from navexp.env import NavEnv

    argv = list(sys.argv[1:] if argv is None else argv)
    ckpt_arg = [a for a in argv if a.startswith("checkpoint=")]
    if not ckpt_arg:
        raise SystemExit("usage: python -m navexp.evaluate checkpoint=<run dir or model_<it>.pt> [overrides]")
    overrides = [a for a in argv if not a.startswith(("checkpoint=", "out="))]
    out_arg = [a.split("=", 1)[1] for a in argv if a.startswith("out=")]
    ckpt = load_checkpoint(ckpt_arg[0].split("=", 1)[1])
    cfg = load_run_config(ckpt, overrides)
    record = evaluation_record(cfg, ckpt["_path"], overrides)
    out = Path(out_arg[0]) if out_arg else default_output(ckpt["_path"], cfg, overrides)
    check_output(out, record, explicit=bool(out_arg))
    env = NavEnv(eval_env_cfg(cfg))
    check_compatible(
        ckpt, env.obs_manager.layout(), env.obs_manager.group_widths, env.obs_manager.history_length
    )
    metrics = evaluate_policy(build_actor(ckpt, cfg, env), cfg, env=env)
    metrics.update(record)
    text = json.dumps(metrics, indent=2)
    print(text, flush=True)  # first: a failing write below must not cost the results
    write_atomic(out, text)
    print(f"[navexp] wrote {out}")
    return metrics


if __name__ == "__main__":
    main()
