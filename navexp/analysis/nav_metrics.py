"""Navigation metrics of evaluated episodes: rates, Wilson intervals over distinct cases, SPL and the
BARN score, overall and per map family or scenario entry.

``EpisodeTable`` holds one row per episode (end reason, time, driven path, the layout's family, its
shortest path and a digest of its (map, start, goal)); ``summarize`` turns it into the metrics dict of
``eval.json``.

- **Rates** ``success_rate``, ``collision_rate``, ``timeout_rate``, ``out_of_bounds_rate`` and
  ``moving_collision_rate`` sum to 1 (every episode ends for exactly one reason): ``collision_rate`` counts
  contacts with walls and static obstacles, ``moving_collision_rate`` those with moving obstacles
  (``env.dynamic``; 0 without them).
- **Confidence intervals** (``ci95``): 95 % Wilson score intervals (scipy's ``binomtest(k, n)
  .proportion_ci(method="wilson")``) over the *distinct cases*, not the episodes. A deterministic policy
  on the same (map, start, goal) repeats the same episode (up to LiDAR noise), so repeats add no
  evidence: n = number of distinct cases, k = round(rate * n). With all cases distinct (random layouts)
  this is the plain interval over the episodes.
- **SPL** (Anderson et al. 2018, "On Evaluation of Embodied Navigation Agents", arXiv:1807.06757):
  ``SPL = 1/N sum_i S_i * l_i / max(p_i, l_i)``, S_i the success indicator, l_i the shortest path from
  start to goal for the robot's radius on the map's occupancy grid (``Layout.shortest_path_m``,
  navexp.task.maps.grid_path: exact to about one grid cell plus 2.7 %), p_i the path the robot actually
  drove (sum of its per-step displacements). l_i ends at the goal's centre while an episode succeeds
  within ``goal_radius_m``, so a straight run drives p_i = l_i - goal radius and scores 1.
- **BARN score** (the BARN Challenge at ICRA 2022: Xiao et al., "Autonomous Ground Navigation in Highly
  Constrained Spaces: Lessons Learned From the BARN Challenge at ICRA 2022", IEEE Robotics & Automation
  Magazine 2022; the maps are those of Perille et al. 2020, "Benchmarking Metric Ground Navigation"):
  ``s_i = 1_success * OT_i / clip(AT_i, 4 * OT_i, 8 * OT_i)``, with OT_i = l_i / v_max the optimal
  time (shortest path at the robot's maximum speed) and AT_i the actual traversal time. A success
  scores between 1/8 (slow: AT >= 8 OT) and 1/4 (AT <= 4 OT), a failure 0; the reported value is the
  mean over episodes. (The formula is pinned from the challenge's published rules as we know them; the
  challenge computed l_i with Dijkstra on its own grid and v_max = 2 m/s for a Jackal, here l_i is our
  grid path and v_max the robot's ``max_lin_vel_mps``; a holonomic robot driving diagonally can exceed
  it, which the lower clip at 4 OT absorbs.)

``mean_wait_s`` is the time an episode spends waiting (control steps that end below 0.1 m/s: stopped
for a passing obstacle, or stuck), averaged over all episodes.

Episodes whose shortest path is unknown (-1: the path check was off; inf: no path on the grid) are left
out of SPL and the BARN score; their number is reported (``spl_excluded_episodes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

from navexp.task.state import COLLISION, MOVING_COLLISION, OUT_OF_BOUNDS, SUCCESS, TIME_OUT

RATES = {
    "success_rate": SUCCESS,
    "collision_rate": COLLISION,
    "timeout_rate": TIME_OUT,
    "out_of_bounds_rate": OUT_OF_BOUNDS,
    "moving_collision_rate": MOVING_COLLISION,
}
"""eval.json rate -> end reason code (navexp.task.state)."""

CI95_COUNTS = "distinct cases"
"""What the n of ``ci95`` counts (written to eval.json as ``ci95_counts``)."""


def wilson_interval(k: int, n: int) -> list[float]:
    """95 % Wilson score interval [low, high] for k successes in n trials ([0, 1] for n = 0)."""
    if n == 0:
        return [0.0, 1.0]
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="wilson")
    return [float(ci.low), float(ci.high)]


def path_length(pos: np.ndarray) -> float:
    """Length (m) of a driven path: the sum of the displacements between consecutive positions [T, 2]."""
    pos = np.asarray(pos, dtype=np.float64)
    return float(np.linalg.norm(np.diff(pos, axis=0), axis=-1).sum())


def known_shortest(shortest_m: np.ndarray) -> np.ndarray:
    """[E] bool: episodes whose shortest path is known (finite and > 0; -1 = not computed, inf = none)."""
    shortest_m = np.asarray(shortest_m, dtype=np.float64)
    return np.isfinite(shortest_m) & (shortest_m > 0)


def spl_terms(success: np.ndarray, shortest_m: np.ndarray, path_m: np.ndarray) -> np.ndarray:
    """Per-episode SPL term S_i * l_i / max(p_i, l_i) [E] (NaN where l_i is unknown)."""
    s = np.asarray(success, dtype=np.float64)
    l_i = np.asarray(shortest_m, dtype=np.float64)
    p_i = np.asarray(path_m, dtype=np.float64)
    ok = known_shortest(l_i)
    out = np.full(l_i.shape, np.nan)
    out[ok] = s[ok] * l_i[ok] / np.maximum(p_i[ok], l_i[ok])
    return out


def barn_scores(
    success: np.ndarray, shortest_m: np.ndarray, time_s: np.ndarray, max_speed_mps: float
) -> np.ndarray:
    """Per-episode BARN score 1_success * OT / clip(AT, 4 OT, 8 OT) [E], OT = l / v_max (NaN where l is
    unknown). In [1/8, 1/4] for a success, 0 for a failure."""
    if max_speed_mps <= 0:
        raise ValueError(f"max_speed_mps={max_speed_mps} is invalid; allowed: a speed > 0 (m/s)")
    s = np.asarray(success, dtype=np.float64)
    l_i = np.asarray(shortest_m, dtype=np.float64)
    at = np.asarray(time_s, dtype=np.float64)
    ok = known_shortest(l_i)
    out = np.full(l_i.shape, np.nan)
    ot = l_i[ok] / max_speed_mps
    out[ok] = s[ok] * ot / np.clip(at[ok], 4.0 * ot, 8.0 * ot)
    return out


@dataclass
class EpisodeTable:
    """One row per evaluated episode, in ``run_episodes`` order (all arrays [E])."""

    reason: np.ndarray
    """End reason code (navexp.task.state: SUCCESS, COLLISION, TIME_OUT, OUT_OF_BOUNDS)."""
    time_s: np.ndarray
    """Episode duration (s): control steps taken x control period."""
    path_m: np.ndarray
    """Path driven (m)."""
    family: np.ndarray
    """Map family index (navexp.task.maps.FAMILIES; -1 unknown, e.g. a scenario file)."""
    shortest_m: np.ndarray
    """Shortest path start -> goal for the robot radius (m; -1 not computed, inf none)."""
    case: np.ndarray
    """Digest (str) of the episode's (map, start, goal): equal digests are the same case."""
    scenario: np.ndarray
    """Scenario-file entry index the episode played (-1 without a scenario file)."""
    wait_s: np.ndarray | None = None
    """Seconds the robot waited (control steps ending below ``navexp.analysis.rollout.WAIT_SPEED_MPS``);
    None: zeros (tables built without it)."""

    def __post_init__(self) -> None:
        if self.wait_s is None:
            self.wait_s = np.zeros(len(self.reason))

    def __len__(self) -> int:
        return len(self.reason)

    def select(self, rows: np.ndarray) -> EpisodeTable:
        """The episodes where ``rows`` [E] bool is set."""
        return EpisodeTable(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    @classmethod
    def concat(cls, tables: list[EpisodeTable]) -> EpisodeTable:
        """The rows of ``tables``, one after another."""
        return cls(*(np.concatenate([getattr(t, f) for t in tables]) for f in cls.__dataclass_fields__))


def rates_and_intervals(table: EpisodeTable) -> dict:
    """Rates (summing to 1), Wilson 95 % intervals over distinct cases, and the counts behind them."""
    n = len(table)
    counts = {name: int((table.reason == code).sum()) for name, code in RATES.items()}
    unknown = n - sum(counts.values())
    if unknown:
        raise RuntimeError(f"{unknown} evaluation episodes ended without a reason; evaluation is broken")
    out: dict = {"num_episodes": n}
    out.update({name: k / n if n else None for name, k in counts.items()})
    cases = len(set(table.case.tolist()))
    # Repeats of one case are one observation: k is the rate's share of the distinct cases.
    out["ci95"] = {
        name: wilson_interval(round(k * cases / n) if n else 0, cases) for name, k in counts.items()
    }
    out["ci95_counts"] = CI95_COUNTS
    out["num_distinct_cases"] = cases
    return out


def path_metrics(table: EpisodeTable, max_speed_mps: float) -> dict:
    """Time and path of successful episodes; SPL and the BARN score over episodes with a known shortest
    path, and how many were left out."""
    ok = table.reason == SUCCESS
    out: dict = {
        "mean_time_to_goal_s": float(table.time_s[ok].mean()) if ok.any() else None,
        "mean_path_length_m": float(table.path_m[ok].mean()) if ok.any() else None,
        "mean_wait_s": float(table.wait_s.mean()) if len(table) else None,
    }
    spl = spl_terms(ok, table.shortest_m, table.path_m)
    barn = barn_scores(ok, table.shortest_m, table.time_s, max_speed_mps)
    known = ~np.isnan(spl)
    out["spl"] = float(spl[known].mean()) if known.any() else None
    out["barn_score"] = float(barn[known].mean()) if known.any() else None
    out["spl_num_episodes"] = int(known.sum())
    out["spl_excluded_episodes"] = int((~known).sum())
    return out


def summarize(
    table: EpisodeTable, max_speed_mps: float, families: tuple[str, ...], scenario_names: list[str] | None
) -> dict:
    """The metrics of ``table``: overall, then ``by_family`` (family name -> the same metrics) and, with
    a scenario file, ``by_scenario`` (entry name -> the same metrics)."""
    out = {**rates_and_intervals(table), **path_metrics(table, max_speed_mps)}
    known = [int(f) for f in np.unique(table.family) if f >= 0]
    if known:
        out["by_family"] = {
            families[f]: _group(table.select(table.family == f), max_speed_mps) for f in known
        }
    if scenario_names is not None:
        out["by_scenario"] = {
            scenario_names[i]: _group(table.select(table.scenario == i), max_speed_mps)
            for i in np.unique(table.scenario).tolist()
            if i >= 0
        }
    return out


def _group(table: EpisodeTable, max_speed_mps: float) -> dict:
    return {**rates_and_intervals(table), **path_metrics(table, max_speed_mps)}
