"""Held-out rollouts of a policy: the one evaluation behind ``train``, ``evaluate`` and ``play``.

- ``EvalRun.build``: the evaluation env (``navexp.config.run_config.eval_env_cfg``: held-out
  layouts, ``auto_reset`` off, the evaluation world count) and rsl_rl's actor with the checkpoint's
  weights (``navexp.learn.rl_cfg.build_actor``);
- ``run_episodes``: N episodes, each counted exactly once, deterministic actions, with per-round and
  per-step hooks; ``TrajectoryRecorder`` is the hook that keeps trajectories for plots;
- ``episode_cases``: per world, the layout's family, shortest path, (map, start, goal) digest and
  scenario entry, read at each round's start;
- ``evaluate``: all of it for a policy and an env, returning the metrics
  (``navexp.analysis.nav_metrics.summarize``: rates, Wilson intervals over distinct cases, SPL, BARN
  score, per family and per scenario entry) and the recorded episodes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from omegaconf import DictConfig

from navexp.analysis.nav_metrics import EpisodeTable, summarize
from navexp.analysis.plots import Episode
from navexp.config.run_config import eval_env_cfg
from navexp.learn.checkpoint import check_compatible, check_model, check_robot
from navexp.learn.cores import recheck
from navexp.learn.models import reset_hidden
from navexp.learn.rl_cfg import build_actor
from navexp.task.env import NavEnv
from navexp.task.maps import FAMILIES
from navexp.task.maps.scenario_files import resolve_scenario_path, scenario_entry_names

if TYPE_CHECKING:
    from navexp.analysis.plots import Episode
    from navexp.task.env import NavEnv

WAIT_SPEED_MPS = 0.1
"""A control step ending below this linear speed (m/s) counts as waiting (``mean_wait_s``)."""

Policy = Callable[[Any], torch.Tensor]
"""Observations (rsl_rl's TensorDict) -> actions [N, A]."""


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
        check_robot(ckpt, str(cfg.env.robot.name))  # before any simulator is built
        check_model(ckpt, str(cfg.ppo.policy.model))
        env = NavEnv(eval_env_cfg(cfg))
        om = env.obs_manager
        check_compatible(ckpt, om.layout(), om.group_widths, om.history_length)
        actor = build_actor(ckpt, cfg, env.get_observations(), env.num_actions).to(env.device)
        return cls(ckpt, cfg, env, actor)


@torch.inference_mode()
def run_episodes(
    policy: Policy,
    env: NavEnv,
    total: int,
    on_round: Callable[[NavEnv], None] | None = None,
    on_step: Callable[[NavEnv, torch.Tensor], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> EpisodeTable:
    """Roll ``policy`` out for ``total`` episodes on an ``auto_reset=False`` env.

    Every world runs one episode per round and is held when it ends; the last round only counts its
    first ``remaining`` worlds, so each episode is counted exactly once. A recurrent policy (rsl_rl's
    ``RNNModel``) starts each round from the zero state and has the state of a world zeroed on the
    step its episode ends (``navexp.learn.models.reset_hidden``). ``on_round(env)`` runs after
    each round's reset and ``on_step(env, active)`` after each step (``active`` [N] bool: worlds whose
    episode was running before the step); ``progress(finished)`` every PROGRESS_EVERY_S seconds with
    the episodes finished so far (one host read then). After each step the process's share of the
    host's cores is re-checked (``navexp.learn.cores.recheck``, at most once a second). Returns one row
    per episode: end reason, duration, path length (m), waiting time (s below ``WAIT_SPEED_MPS``), case
    (``episode_cases``).
    """
    parts: list[EpisodeTable] = []
    done = 0
    next_report = time.monotonic() + PROGRESS_EVERY_S
    first_round = True
    while done < total:
        obs = env.get_observations() if first_round else env.reset()
        first_round = False
        reset_hidden(policy)  # a new round: every world starts an episode from the zero state
        if on_round is not None:
            on_round(env)
        cases = episode_cases(env)
        n = env.num_envs
        path = torch.zeros(n, device=env.device)
        steps, waiting = torch.zeros((2, n), dtype=torch.long, device=env.device)  # steps run, waited
        for _ in range(env.max_episode_length + 1):
            active = ~env.held
            prev = env.state.pos_xy.clone()
            obs, _, dones, _ = env.step(policy(obs))
            reset_hidden(policy, dones)  # an ended world's next episode must not see this one's memory
            path += (env.state.pos_xy - prev).norm(dim=-1) * active
            steps += active.long()
            waiting += (active & (env.state.vel_world.norm(dim=-1) < WAIT_SPEED_MPS)).long()
            if on_step is not None:
                on_step(env, active)
            recheck()  # this process's share of the host's cores, as other navexp processes come and go
            if progress is not None and time.monotonic() >= next_report:
                progress(done + int(env.held[: min(n, total - done)].sum()))
                next_report = time.monotonic() + PROGRESS_EVERY_S
            if bool(env.held.all()):
                break
        take = min(n, total - done)
        parts.append(_round_table(env, take, steps, path, waiting, cases))
        done += take
    return EpisodeTable.concat(parts)


def _round_table(
    env: NavEnv,
    take: int,
    steps: torch.Tensor,
    path: torch.Tensor,
    waiting: torch.Tensor,
    cases: dict[str, np.ndarray],
) -> EpisodeTable:
    """The rows of a round's first ``take`` worlds: end reason, duration, path, waiting time, case."""
    return EpisodeTable(
        reason=env.state.reason[:take].cpu().numpy().copy(),  # the state is updated in place
        time_s=steps[:take].double().cpu().numpy() * env.control_dt,
        path_m=path[:take].double().cpu().numpy(),
        wait_s=waiting[:take].double().cpu().numpy() * env.control_dt,
        **{k: v[:take] for k, v in cases.items()},
    )


PROGRESS_EVERY_S = 5.0
"""Seconds between two progress lines of an evaluation (``run_episodes(progress=...)``)."""


CASE_FIELDS = (
    "cyl_xy",
    "cyl_r",
    "cyl_active",
    "box_xy",
    "box_half",
    "box_yaw",
    "box_active",
    "robot_xy",
    "robot_yaw",
    "goal_xy",
    "wall_xy",
    "wall_half",
    "wall_yaw",
    "wall_active",
)
"""Layout fields that make a case (map, start, goal); family, seed and shortest path follow from them."""


def episode_cases(env: NavEnv) -> dict[str, np.ndarray]:
    """Per world [N], for the episode it starts now: ``family``, ``shortest_m``, ``case`` (a digest of
    its (map, start, goal)) and ``scenario`` (the scenario-file entry it plays, else -1)."""
    lay = env.layout
    fields = [getattr(lay, k).cpu().numpy() for k in CASE_FIELDS]
    case = np.array(
        [
            hashlib.blake2b(b"".join(f[w].tobytes() for f in fields), digest_size=12).hexdigest()
            for w in range(env.num_envs)
        ]
    )
    scenario = np.full(env.num_envs, -1, dtype=np.int64)
    if env.scenarios is not None:  # world w's k-th episode (episode_count k + 1) plays row (w + k N) mod
        # rows, and row j plays entry j mod entries (a jittered entry's cases are rows of the one entry)
        k = env.episode_count.cpu().numpy() - 1
        row = (np.arange(env.num_envs) + k * env.num_envs) % env.scenarios.num_worlds
        scenario = row % env.scenario_entries
    return {
        "family": lay.family.cpu().numpy().copy(),  # the layouts are rewritten in place by resets
        "shortest_m": lay.shortest_path_m.double().cpu().numpy(),
        "case": case,
        "scenario": scenario,
    }


@dataclass
class TrajectoryRecorder:
    """``run_episodes`` hooks that keep every world's trajectory and layout, round by round."""

    rounds: list[dict[str, Any]] = field(default_factory=list)

    def on_round(self, env: NavEnv) -> None:
        # Not the goal distance field (a reward's input, 3.2 KB a world): the figures redraw without it.
        lay = {k: v.cpu().numpy().copy() for k, v in vars(env.layout).items() if k != "goal_field"}
        self.rounds.append(
            {"layout": lay, "pos": [], "yaw": [], "speed": [], "scan": [], "active": [], "mov": []}
        )
        self._keep(env)

    def on_step(self, env: NavEnv, active: torch.Tensor) -> None:
        self._keep(env)
        self.rounds[-1]["active"].append(active.cpu().numpy())

    def _keep(self, env: NavEnv) -> None:
        s, r = env.state, self.rounds[-1]
        # Copies: a step rewrites the state's tensors in place (on the CPU .cpu() is no copy).
        r["pos"].append(s.pos_xy.cpu().numpy().copy())
        r["yaw"].append(s.yaw.cpu().numpy().copy())
        r["speed"].append(s.vel_world.norm(dim=-1).cpu().numpy())
        r["scan"].append(s.scan.cpu().numpy().copy())
        if env.motion is not None:  # the moving obstacles' positions, for their tracks in the figures
            r["mov"].append(env.motion.pos.cpu().numpy().copy())

    def episodes(self, reasons: list[int]) -> list[Episode]:
        """The recorded episodes in ``run_episodes`` order, each cut at its last step."""
        out: list[Episode] = []
        for r in self.rounds:
            pos, yaw, speed, scan = (np.stack(r[k]) for k in ("pos", "yaw", "speed", "scan"))
            steps = np.stack(r["active"]).sum(axis=0)
            for w in range(pos.shape[1]):
                if len(out) == len(reasons):
                    break
                t = int(steps[w]) + 1
                lay = {k: v[w] for k, v in r["layout"].items()}
                if r["mov"]:
                    lay["mov_track"] = np.stack(r["mov"])[:t, w]
                out.append(Episode(lay, pos[:t, w], yaw[:t, w], speed[:t, w], scan[:t, w], reasons[len(out)]))
        return out


def evaluate(
    policy: Policy, env: NavEnv, total: int, record: bool = False, label: str | None = None
) -> tuple[dict, list[Episode]]:
    """Run ``total`` held-out episodes; return the metrics (``navexp.analysis.nav_metrics.summarize``)
    and, with ``record``, the recorded episodes (else an empty list). With ``label``, a line
    ``[navexp] <label>: k/total episodes`` every PROGRESS_EVERY_S seconds while they run."""
    recorder = TrajectoryRecorder() if record else None
    hooks: dict = {"on_round": recorder.on_round, "on_step": recorder.on_step} if recorder else {}
    if label is not None:
        print(f"[navexp] {label}: {total} episodes on {env.num_envs} worlds", flush=True)
        hooks["progress"] = lambda k: print(f"[navexp] {label}: {k}/{total} episodes", flush=True)
    table = run_episodes(policy, env, total, **hooks)
    episodes = recorder.episodes(table.reason.tolist()) if recorder else []
    names = None
    if env.scenarios is not None:
        names = scenario_entry_names(resolve_scenario_path(str(env.env_cfg.scenarios)))
    return summarize(table, env.max_lin_vel_mps, FAMILIES, names), episodes
