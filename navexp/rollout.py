"""Held-out rollouts of a policy: the one evaluation behind ``train``, ``evaluate`` and ``play``.

- ``load_run_config``: a checkpoint's training config with the command line's overrides applied;
- ``eval_env_cfg`` / ``EvalRun.build``: the evaluation env (held-out layouts, ``auto_reset`` off, the
  evaluation world count) and rsl_rl's actor with the checkpoint's weights;
- ``run_episodes``: N episodes, each counted exactly once, deterministic actions, with per-round and
  per-step hooks; ``TrajectoryRecorder`` is the hook that keeps trajectories for plots;
- ``summarize``: rates summing to 1, Wilson 95 % intervals, time and path of successful episodes;
- ``evaluate``: all of it for a policy and an env, returning the metrics (and the recorded episodes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.models import reset_hidden
from navexp.state import COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT

if TYPE_CHECKING:
    from navexp.env import NavEnv
    from navexp.plots import Episode

Policy = Callable[[Any], torch.Tensor]
"""Observations (rsl_rl's TensorDict) -> actions [N, A]."""

RATES = {
    "success_rate": SUCCESS,
    "collision_rate": COLLISION,
    "timeout_rate": TIME_OUT,
    "out_of_bounds_rate": OUT_OF_BOUNDS,
}


def load_run_config(ckpt: dict, overrides: list[str]) -> DictConfig:
    """The checkpoint's training config, with the command line's group choices and keys applied.

    A key override replaces that key; a group override (``env=dense``) replaces the group's node; a
    size preset (``size=cpu``) sets the keys the preset sets. All values come from composing the
    app's config with the same overrides.
    """
    from navexp.api import CONFIG_DIR, compose_config
    from navexp.cli import group_package, override_keys
    from navexp.presets import preset_values

    composed = compose_config(overrides)
    stored = (ckpt.get("infos") or {}).get("config")
    if stored is None:
        return composed
    # Keys added to the schema since the run was trained take their defaults; the run's own values win.
    defaults = compose_config([])
    OmegaConf.set_struct(defaults, False)
    cfg = OmegaConf.merge(defaults, OmegaConf.create(stored))
    keys = set()
    for key in override_keys(overrides):
        package = group_package(key) if (CONFIG_DIR / key).is_dir() else key
        if package == "_global_":  # a preset group (size=cpu): it sets keys all over the config
            keys |= {key, *preset_values(str(OmegaConf.select(composed, key)))}
        else:  # a key, or a group's node where the group lands (robot=diffdrive -> env.robot)
            keys.add(package)
    with open_dict(cfg):
        for key in sorted(keys):  # every value is the composed one, so the order does not matter
            OmegaConf.update(cfg, key, OmegaConf.select(composed, key), merge=False)
    return cfg


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


def build_actor(ckpt: dict, cfg: DictConfig, env: NavEnv) -> torch.nn.Module:
    """rsl_rl's actor of the config's ``ppo.model`` with the checkpoint's weights and normalizer, on the
    env's device (a recurrent one with no state yet: ``run_episodes`` resets it per round)."""
    from rsl_rl.utils import resolve_class

    from navexp.rl_cfg import build_train_cfg

    train_cfg = build_train_cfg(cfg)
    actor_class, actor_cfg = resolve_class(train_cfg["actor"])
    actor = actor_class(
        env.get_observations(), train_cfg["obs_groups"], "actor", env.num_actions, **actor_cfg
    )
    actor.load_state_dict(ckpt["actor_state_dict"])
    return actor.to(env.device).eval()


@dataclass
class EvalRun:
    """A checkpoint ready to evaluate: its config (with overrides), the evaluation env and the actor."""

    ckpt: dict
    cfg: DictConfig
    env: NavEnv
    actor: torch.nn.Module

    @classmethod
    def build(cls, ckpt: dict, cfg: DictConfig) -> EvalRun:
        """Build the evaluation env of ``cfg``; a checkpoint with another observation layout fails here."""
        from navexp.checkpoint import check_compatible, check_model, check_robot
        from navexp.env import NavEnv

        check_robot(ckpt, str(cfg.env.robot.name))  # before any simulator is built
        check_model(ckpt, str(cfg.ppo.model))
        env = NavEnv(eval_env_cfg(cfg))
        om = env.obs_manager
        check_compatible(ckpt, om.layout(), om.group_widths, om.history_length)
        return cls(ckpt, cfg, env, build_actor(ckpt, cfg, env))


@torch.inference_mode()
def run_episodes(
    policy: Policy,
    env: NavEnv,
    total: int,
    on_round: Callable[[NavEnv], None] | None = None,
    on_step: Callable[[NavEnv, torch.Tensor], None] | None = None,
) -> tuple[list[int], list[float], list[float]]:
    """Roll ``policy`` out for ``total`` episodes on an ``auto_reset=False`` env.

    Every world runs one episode per round and is held when it ends; the last round only counts its
    first ``remaining`` worlds, so each episode is counted exactly once. A recurrent policy (rsl_rl's
    ``RNNModel``) starts each round from the zero state and has the state of a world zeroed on the
    step its episode ends (``navexp.models.reset_hidden``). ``on_round(env)`` runs after
    each round's reset and ``on_step(env, active)`` after each step (``active`` [N] bool: worlds whose
    episode was running before the step). Returns the end reason, duration (s) and path length (m) of
    each episode.
    """
    reasons, times, paths = [], [], []
    first_round = True
    while len(reasons) < total:
        obs = env.get_observations() if first_round else env.reset()
        first_round = False
        reset_hidden(policy)  # a new round: every world starts an episode from the zero state
        if on_round is not None:
            on_round(env)
        n = env.num_envs
        path = torch.zeros(n, device=env.device)
        steps = torch.zeros(n, dtype=torch.long, device=env.device)
        for _ in range(env.max_episode_length + 1):
            active = ~env.held
            prev = env.state.pos_xy.clone()
            obs, _, dones, _ = env.step(policy(obs))
            reset_hidden(policy, dones)  # an ended world's next episode must not see this one's memory
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


def wilson_interval(k: int, n: int, z: float = 1.96) -> list[float]:
    """95 % Wilson score interval for k successes in n trials."""
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, centre - half), min(1.0, centre + half)]


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


@dataclass
class TrajectoryRecorder:
    """``run_episodes`` hooks that keep every world's trajectory and layout, round by round."""

    rounds: list[dict[str, Any]] = field(default_factory=list)

    def on_round(self, env: NavEnv) -> None:
        lay = {k: v.cpu().numpy().copy() for k, v in vars(env.layout).items()}
        self.rounds.append({"layout": lay, "pos": [], "yaw": [], "speed": [], "scan": [], "active": []})
        self._keep(env)

    def on_step(self, env: NavEnv, active: torch.Tensor) -> None:
        self._keep(env)
        self.rounds[-1]["active"].append(active.cpu().numpy())

    def _keep(self, env: NavEnv) -> None:
        s, r = env.state, self.rounds[-1]
        r["pos"].append(s.pos_xy.cpu().numpy())
        r["yaw"].append(s.yaw.cpu().numpy())
        r["speed"].append(s.vel_world.norm(dim=-1).cpu().numpy())
        r["scan"].append(s.scan.cpu().numpy())

    def episodes(self, reasons: list[int]) -> list[Episode]:
        """The recorded episodes in ``run_episodes`` order, each cut at its last step."""
        from navexp.plots import Episode

        out: list[Episode] = []
        for r in self.rounds:
            pos, yaw, speed, scan = (np.stack(r[k]) for k in ("pos", "yaw", "speed", "scan"))
            steps = np.stack(r["active"]).sum(axis=0)
            for w in range(pos.shape[1]):
                if len(out) == len(reasons):
                    break
                t = int(steps[w]) + 1
                lay = {k: v[w] for k, v in r["layout"].items()}
                out.append(Episode(lay, pos[:t, w], yaw[:t, w], speed[:t, w], scan[:t, w], reasons[len(out)]))
        return out


def evaluate(policy: Policy, env: NavEnv, total: int, record: bool = False) -> tuple[dict, list[Episode]]:
    """Run ``total`` held-out episodes; return the metrics (``summarize``) and, with ``record``, the
    recorded episodes (else an empty list)."""
    recorder = TrajectoryRecorder() if record else None
    hooks = {"on_round": recorder.on_round, "on_step": recorder.on_step} if recorder else {}
    reasons, times, paths = run_episodes(policy, env, total, **hooks)
    episodes = recorder.episodes(reasons) if recorder else []
    return summarize(reasons, times, paths), episodes
