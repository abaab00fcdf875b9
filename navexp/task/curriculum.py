"""The success curriculum (``curriculum=success``): layout difficulty that follows the success rate.

A difficulty level l in 0..L sets the random family's obstacle counts and sizes and the map family
weights by interpolating between ``easy`` (level 0) and ``hard`` (level L) at t = l / L:

    range(l)   = (1 - t) * easy + t * hard         (obstacle counts rounded half up to integers)
    weight(l)  = (1 - t) * w_easy / sum(w_easy) + t * w_hard / sum(w_hard)   (per family)

After every PPO iteration the level rises by one when the rolling success rate is above
``promote_above`` and falls by one when it is below ``demote_below``, but only once
``min_iterations`` iterations and ``min_episodes`` finished episodes have passed since the last
change (hysteresis: with the default, the rolling window of 1000 episodes, no episode counts towards
two decisions). A change refills the env's layout pool, so newly drawn layouts follow it; the
episodes in progress finish on the layouts they started with.

The decision runs between iterations, where the runner reads the success rate anyway: the env's step
stays free of host syncs. Under torchrun rank 0 decides with the success rate averaged over ranks
and broadcasts its state, so every rank trains on the same level.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from omegaconf import DictConfig, open_dict

from navexp.task.maps.families import FAMILIES, MapSpec
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.validation import validate_env_cfg

TYPES = ("none", "success")
"""``curriculum.type`` options."""

RANGE_KEYS = (
    ("cylinder_count", True),
    ("box_count", True),
    ("cylinder_radius_m", False),
    ("box_half_size_m", False),
)
"""(env.obstacles key, whether integer) of the ranges a level sets."""


@dataclass
class CurriculumState:
    """What a checkpoint keeps of the curriculum (``infos["curriculum"]``)."""

    level: int
    episodes_since_change: int = 0
    """Finished training episodes (rank 0's worlds) since the last change or the start."""
    iterations_since_change: int = 0
    changes: int = 0
    """Level changes so far (up and down)."""


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ValueError(f"curriculum config: curriculum.{key}={value!r} is invalid; allowed: {allowed}")


def enabled(cfg: DictConfig) -> bool:
    """Whether the experiment config asks for a curriculum (configs without the group: no)."""
    cur = cfg.get("curriculum")
    return cur is not None and str(cur.type) != "none"


class SuccessCurriculum:
    """Level state machine plus the level -> layout settings mapping of one experiment config.

    ``update(success_rate, new_episodes)`` is pure bookkeeping (no env, no device): tests drive it with
    synthetic success sequences. ``env_cfg_at(level)`` and ``specs_at(level)`` give the env config and
    the layout specs of a level.
    """

    def __init__(self, cfg: DictConfig, window: int = 1000) -> None:
        """Validate ``cfg.curriculum`` against ``cfg.env`` and start at ``start_level``; ``window`` is the
        env's rolling success window (NavEnv.OUTCOME_WINDOW), the default of ``min_episodes``."""
        validate_curriculum_cfg(cfg)
        cur = cfg.curriculum
        self.cfg, self.env_cfg = cur, cfg.env
        self.levels = int(cur.levels)
        self._validate_ends()
        self.promote_above, self.demote_below = float(cur.promote_above), float(cur.demote_below)
        self.min_episodes = int(window if cur.min_episodes is None else cur.min_episodes)
        self.min_iterations = int(cur.min_iterations)
        self.state = CurriculumState(level=int(cur.start_level))

    def _validate_ends(self) -> None:
        """Both ends must make a valid env config (counts within the slots, sizes, families); the
        levels between lie inside their ranges."""
        for end, level in (("easy", 0), ("hard", self.levels)):
            try:
                validate_env_cfg(self.env_cfg_at(level))
            except ValueError as e:
                msg = f"curriculum config: curriculum.{end} (level {level}) gives an invalid {e}"
                raise ValueError(msg) from e

    # -- level -> layouts -----------------------------------------------------------------
    def values_at(self, level: int) -> dict[str, Any]:
        """The layout settings of ``level``: the four obstacle ranges and ``weights`` {family: w}
        (normalised, every family of FAMILIES)."""
        t = level / self.levels
        out: dict[str, Any] = {}
        for key, is_int in RANGE_KEYS:
            easy, hard = self._end(self.cfg.easy, key), self._end(self.cfg.hard, key)
            # (1 - t) e + t h rather than e + (h - e) t: the ends come out exact (no 0.44999999999999996)
            mixed = [(1 - t) * e + t * h for e, h in zip(easy, hard, strict=True)]
            out[key] = [math.floor(v + 0.5) for v in mixed] if is_int else mixed
        we, wh = self._weights(self.cfg.easy), self._weights(self.cfg.hard)
        out["weights"] = {f: (1 - t) * we[f] + t * wh[f] for f in FAMILIES}
        return out

    def env_cfg_at(self, level: int) -> DictConfig:
        """A copy of the env config with ``level``'s obstacle ranges and family weights."""
        values = self.values_at(level)
        env_cfg = self.env_cfg.copy()
        with open_dict(env_cfg):
            for key, _ in RANGE_KEYS:
                env_cfg.obstacles[key] = values[key]
            env_cfg.maps.weights = values["weights"]
        return env_cfg

    def specs_at(self, level: int) -> tuple[LayoutSpec, MapSpec]:
        """The layout pool's specs at ``level`` (NavEnv.set_layout_specs)."""
        env_cfg = self.env_cfg_at(level)
        return LayoutSpec.from_env_cfg(env_cfg), MapSpec.from_env_cfg(env_cfg)

    def experiment_cfg_at(self, cfg: DictConfig, level: int) -> DictConfig:
        """A copy of the experiment config ``cfg`` whose env draws ``level``'s layouts (to build the env)."""
        out = cfg.copy()
        env_cfg = self.env_cfg_at(level)
        with open_dict(out):
            for key, _ in RANGE_KEYS:
                out.env.obstacles[key] = env_cfg.obstacles[key]
            out.env.maps.weights = env_cfg.maps.weights
        return out

    def _end(self, stage: DictConfig, key: str) -> list[float]:
        value = stage[key]
        return list(self.env_cfg.obstacles[key] if value is None else value)

    def _weights(self, stage: DictConfig) -> dict[str, float]:
        """A stage's family weights, normalised over FAMILIES (all null: the env's)."""
        set_ = {f: float(w) for f, w in stage.weights.items() if w is not None}
        raw = set_ if set_ else {f: float(w) for f, w in self.env_cfg.maps.weights.items()}
        total = sum(raw.values())
        return {f: raw.get(f, 0.0) / total for f in FAMILIES}

    # -- transitions ----------------------------------------------------------------------
    def update(self, success_rate: float, new_episodes: int) -> int:
        """Count one iteration with ``new_episodes`` finished episodes and decide: +1 (promoted), -1
        (demoted) or 0. A NaN rate (no episodes yet) never changes the level."""
        s = self.state
        s.iterations_since_change += 1
        s.episodes_since_change += int(new_episodes)
        settled = (
            s.iterations_since_change >= self.min_iterations and s.episodes_since_change >= self.min_episodes
        )
        if not settled or not math.isfinite(success_rate):
            return 0
        if success_rate > self.promote_above and s.level < self.levels:
            step = 1
        elif success_rate < self.demote_below and s.level > 0:
            step = -1
        else:
            return 0
        self.state = CurriculumState(level=s.level + step, changes=s.changes + 1)
        return step

    def state_dict(self) -> dict[str, int]:
        """The state as plain ints (checkpoint infos; torch.load(weights_only=True) reads it)."""
        return asdict(self.state)

    def load_state_dict(self, state: dict) -> None:
        """Continue from a saved state; a level outside 0..levels fails naming both."""
        level = int(state["level"])
        if not 0 <= level <= self.levels:
            raise ValueError(
                f"the checkpoint's curriculum level {level} is outside this config's 0..{self.levels} "
                f"(curriculum.levels={self.levels}); resume with the levels it was trained with"
            )
        self.state = CurriculumState(**{k: int(v) for k, v in state.items()})

    def describe(self, level: int) -> str:
        """One line of ``level``'s settings for the console."""
        v = self.values_at(level)
        fams = ", ".join(f"{f} {w:.2f}" for f, w in v["weights"].items() if w > 0)
        return (
            f"cylinders {v['cylinder_count']} r {_fmt(v['cylinder_radius_m'])} m, boxes {v['box_count']} "
            f"half-size {_fmt(v['box_half_size_m'])} m, families {fams}"
        )

    def scalars(self, level: int) -> dict[str, float]:
        """The dashboard's ``Curriculum/`` scalars of ``level``: level, obstacle ranges and the weights
        of the families either end uses."""
        v = self.values_at(level)
        out = {"Curriculum/level": float(level)}
        for key, _ in RANGE_KEYS:
            out[f"Curriculum/{key}_min"], out[f"Curriculum/{key}_max"] = map(float, v[key])
        easy, hard = self.values_at(0)["weights"], self.values_at(self.levels)["weights"]
        for f in FAMILIES:
            if easy[f] > 0 or hard[f] > 0:
                out[f"Curriculum/weight_{f}"] = v["weights"][f]
        return out


def _fmt(pair: list[float]) -> str:
    return "[" + ", ".join(f"{x:.2f}" for x in pair) + "]"


def validate_curriculum_cfg(cfg: DictConfig) -> None:
    """Raise ValueError naming the key, the value and what is allowed for an impossible curriculum
    (SuccessCurriculum then checks that both ends make a valid env config)."""
    cur = cfg.curriculum
    _check(str(cur.type) in TYPES, "type", cur.type, " | ".join(TYPES))
    _check(cur.levels >= 1, "levels", cur.levels, "an integer >= 1")
    _check(0 <= cur.start_level <= cur.levels, "start_level", cur.start_level, f"0 <= value <= {cur.levels}")
    for key in ("promote_above", "demote_below"):
        _check(0.0 <= cur[key] <= 1.0, key, cur[key], "a success rate in [0, 1]")
    _check(
        cur.demote_below < cur.promote_above,
        "demote_below",
        cur.demote_below,
        f"< curriculum.promote_above ({cur.promote_above})",
    )
    episodes = cur.min_episodes
    _check(episodes is None or episodes >= 1, "min_episodes", episodes, "an integer >= 1 or null")
    _check(cur.min_iterations >= 1, "min_iterations", cur.min_iterations, "an integer >= 1")
    for end in ("easy", "hard"):
        stage = cur[end]
        for f, w in stage.weights.items():
            _check(f in FAMILIES, f"{end}.weights.{f}", w, f"a family of {' | '.join(FAMILIES)}")
            _check(w is None or w >= 0, f"{end}.weights.{f}", w, ">= 0 or null")
        set_ = [w for w in stage.weights.values() if w is not None]
        _check(not set_ or sum(set_) > 0, f"{end}.weights", dict(stage.weights), "at least one weight > 0")


def make_curriculum(cfg: DictConfig, window: int = 1000) -> SuccessCurriculum | None:
    """The success curriculum of ``cfg`` (validated), or None for ``curriculum=none``."""
    return SuccessCurriculum(cfg, window) if enabled(cfg) else None


def restore_curriculum(curriculum: SuccessCurriculum | None, ckpt: dict | None, quiet: bool) -> None:
    """Continue at the checkpoint's curriculum level (or say why the run starts elsewhere), and print
    the level the run starts at."""
    saved = checkpoint_state(ckpt)
    if curriculum is None:
        if saved and not quiet:
            print(
                f"[navexp] the checkpoint was trained with a curriculum (level {saved['level']}); "
                f"curriculum=none: training continues on the env's own layouts "
                f"(resume with curriculum=success to continue it)"
            )
        return
    if saved:
        curriculum.load_state_dict(saved)
    elif ckpt is not None and not quiet:
        print("[navexp] the checkpoint holds no curriculum state; the curriculum starts at start_level")
    if not quiet:
        level = curriculum.state.level
        print(
            f"[navexp] curriculum: level {level} of {curriculum.levels}"
            f"{' (resumed)' if saved else ''}: {curriculum.describe(level)}"
        )


def checkpoint_state(ckpt: dict | None) -> dict | None:
    """The curriculum state a checkpoint carries (None: none, or no checkpoint)."""
    if ckpt is None:
        return None
    state = (ckpt.get("infos") or {}).get("curriculum")
    return dict(state) if state else None
