"""The measurements behind ``python -m navexp.bench`` (throughput per backend and world count against a
classic-MuJoCo baseline written as a user would, obstacle-slot costs, one PPO iteration) and
``python -m navexp.bench_dist`` (training with 1 and N processes). What each figure measures is in
``navexp/bench.py``'s docstring, which is also its ``--help``."""

from __future__ import annotations

import copy
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import torch

from navexp.analysis.sync_audit import SyncAudit
from navexp.config.api import compose_config, make_env
from navexp.learn.rl_cfg import build_train_cfg
from navexp.learn.runner import NavRunner
from navexp.paths import ROOT
from navexp.sim import make_sim
from navexp.sim.layout import slot_poses
from navexp.sim.scene import PARK_Z_M, build_model


def _rate(fn, n_worlds: int, steps: int, sync) -> float:
    """World-steps per second of ``fn`` (one control step for all worlds) over ``steps`` calls."""
    fn()
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    sync()
    return n_worlds * steps / (time.perf_counter() - t)


class ClassicBaseline:
    """The same scene in classic MuJoCo: one MjData per world, Python loop, mj_multiRay LiDAR."""

    def __init__(self, env) -> None:
        spec = replace(env.sim.sim_spec, device="cpu")
        self.decimation = spec.decimation
        self.max_range = spec.max_range_m
        self.angles = np.array(spec.beam_angles_rad)
        # The same scene and the env's current layouts: navexp's classic backend sizes one MjModel per
        # world; the loops below are what a user would write.
        layout = env.layout.to("cpu")
        ref = make_sim("mujoco", spec)
        ref.write_layouts(torch.ones(env.num_envs, dtype=torch.bool), layout)
        self.z, self.robot_body = spec.scene.robot_z, ref.robot_body
        pos, quat = (
            x.double().numpy() for x in slot_poses(layout, spec.scene.obstacle_height_m / 2, PARK_Z_M)
        )
        plain = build_model(spec.scene)  # the MJCF without navexp's contact sensor
        self.models, self.datas = [], []
        qpos = env.sim.qpos.detach().cpu().double().numpy()
        for w, sized in enumerate(ref.models):
            m = copy.copy(plain)
            for field in ("geom_size", "geom_rbound", "geom_aabb", "bvh_aabb"):
                getattr(m, field)[:] = getattr(sized, field)
            self.models.append(m)
            d = mujoco.MjData(m)
            d.mocap_pos[:], d.mocap_quat[:] = pos[w], quat[w]  # mocap ids follow the slot order
            d.qpos[:] = qpos[w]
            mujoco.mj_forward(m, d)
            self.datas.append(d)
        rng = np.random.default_rng(0)
        self.ctrl = rng.uniform(-1, 1, tuple(env.sim.ctrl.shape))
        n = len(self.angles)
        self.dist, self.geomid = np.zeros(n), np.zeros(n, dtype=np.int32)

    def physics(self) -> None:
        for m, d, c in zip(self.models, self.datas, self.ctrl, strict=True):
            d.ctrl[:] = c
            for _ in range(self.decimation):
                mujoco.mj_step(m, d)
            mujoco.mj_kinematics(m, d)

    def lidar(self) -> None:
        n = len(self.angles)
        for m, d in zip(self.models, self.datas, strict=True):
            a = d.qpos[2] + self.angles
            vec = np.stack((np.cos(a), np.sin(a), np.zeros_like(a)), axis=1).ravel()
            pnt = np.array([d.qpos[0], d.qpos[1], self.z])
            mujoco.mj_multiRay(
                m, d, pnt, vec, None, 1, self.robot_body, self.geomid, self.dist, None, n, mujoco.mjMAXVAL
            )

    def physics_and_lidar(self) -> None:
        self.physics()
        self.lidar()


def peak_host_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_device_mb(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    import warp as wp  # deferred: Warp loads (and may compile) only when a CUDA device is measured

    try:
        return wp.get_mempool_used_mem_high(device) / 2**20
    except Exception:
        return torch.cuda.max_memory_allocated() / 2**20


def count_syncs_and_ops(env, actions: torch.Tensor, steps: int = 10) -> dict:
    """Host syncs and ATen operations per NavEnv.step, counted over ``steps`` steps between fault
    checks (navexp.analysis.sync_audit); the fault check itself adds one sync every env.check_every steps."""
    env.check_faults()  # start a check period, so none falls inside the counted steps
    steps = min(steps, env.check_every - 1) or 1
    with SyncAudit() as audit:
        for _ in range(steps):
            env.step(actions)
    return {
        "host_syncs_per_step": audit.num_syncs / steps,
        "torch_ops_per_step": audit.num_ops / steps,
        "check_every": env.check_every,
    }


def bench_worlds(n: int, device: str, steps: int, baseline: bool, backend: str) -> dict:
    t = time.perf_counter()
    env = make_env(
        compose_config([f"env.num_envs={n}", f"env.device={device}", f"env.sim.backend={backend}"])
    )
    build_s = time.perf_counter() - t
    actions = (
        torch.rand(n, env.num_actions, generator=torch.Generator().manual_seed(0)).to(env.device) * 2 - 1
    )
    t = time.perf_counter()
    env.step(actions)  # first step: every kernel is compiled or loaded (and captured on CUDA)
    env.sim.synchronize()
    first_step_s = time.perf_counter() - t
    sync = env.sim.synchronize
    unchanged = torch.zeros(n, dtype=torch.bool, device=env.device)
    row = {
        "backend": env.backend,
        "num_envs": n,
        "build_s": build_s,
        "first_step_s": first_step_s,
        "physics_sps": _rate(getattr(env.sim, "step_physics", env.sim.step), n, steps, sync),
        "physics_lidar_sps": _rate(lambda: (env.sim.step(), env.sim.sense(unchanged)), n, steps, sync),
        "full_step_sps": _rate(lambda: env.step(actions), n, steps, sync),
    }
    row.update(count_syncs_and_ops(env, actions))
    if baseline:
        base = ClassicBaseline(env)
        bsteps = max(3, steps // 3)
        row["baseline_physics_sps"] = _rate(base.physics, n, bsteps, lambda: None)
        row["baseline_physics_lidar_sps"] = _rate(base.physics_and_lidar, n, bsteps, lambda: None)
        row["ratio_physics"] = row["physics_sps"] / row["baseline_physics_sps"]
        row["ratio_physics_lidar"] = row["physics_lidar_sps"] / row["baseline_physics_lidar_sps"]
        row["ratio_full_vs_baseline_physics_lidar"] = row["full_step_sps"] / row["baseline_physics_lidar_sps"]
    row["peak_host_mb"] = peak_host_mb()
    row["peak_device_mb"] = peak_device_mb(str(env.device))
    return row


def _walls_along_the_sides(env, w: int):
    """The env's current layouts with all ``w`` wall slots standing: short walls (0.3 m x 0.1 m) spread
    along the four sides of the room, 0.2 m inside them, out of the robot's way."""
    lay = env.layout.index(torch.arange(env.num_envs, device=env.device))
    if w == 0:
        return lay
    side = torch.arange(w, device=env.device) % 4
    t = (torch.arange(w, device=env.device) // 4 + 0.5) / ((w + 3) // 4) * 2 - 1  # in (-1, 1)
    hx, hy = env.half_x - 0.2, env.half_y - 0.2
    x = torch.where(side < 2, torch.where(side == 0, hx, -hx), t * hx)
    y = torch.where(side < 2, t * hy, torch.where(side == 2, hy, -hy))
    lay.wall_xy = torch.stack((x, y), -1).expand(env.num_envs, -1, -1).clone()
    lay.wall_half = torch.tensor([0.15, 0.05], device=env.device).expand(env.num_envs, w, 2).clone()
    lay.wall_active = torch.ones(env.num_envs, w, dtype=torch.bool, device=env.device)
    return lay


def _slot_row(n: int, device: str, steps: int, backend: str, w: int) -> dict:
    over = [f"env.num_envs={n}", f"env.device={device}", f"env.sim.backend={backend}"]
    env = make_env(compose_config([*over, f"env.obstacles.wall_slots={w}"]))
    actions = torch.rand(n, 3, generator=torch.Generator().manual_seed(0)).to(env.device) * 2 - 1
    sync, everyone = env.sim.synchronize, torch.ones(n, dtype=torch.bool, device=env.device)
    unchanged = torch.zeros(n, dtype=torch.bool, device=env.device)
    full = _rate(lambda: env.step(actions), n, steps, sync)  # parked walls (random layouts)
    env.sim.write_layouts(everyone, _walls_along_the_sides(env, w))
    env.sim.sense(everyone)
    active = _rate(lambda: (env.sim.step(), env.sim.sense(unchanged)), n, steps, sync)
    return {
        "backend": env.backend,
        "num_envs": n,
        "wall_slots": w,
        "physics_lidar_sps": active,
        "full_step_sps": full,
    }


def bench_slots(n: int, device: str, steps: int, backend: str, slots: list[int]) -> list[dict]:
    """Simulator and env step rates with each number of extra wall slots; the cost per slot against
    the first entry (microseconds per world and control step)."""
    rows = [_slot_row(n, device, steps, backend, w) for w in slots]
    base = rows[0]
    for r in rows[1:]:
        extra = r["wall_slots"] - base["wall_slots"]
        for key in ("physics_lidar_sps", "full_step_sps"):
            r[key.replace("_sps", "_us_per_slot")] = 1e6 * (1 / r[key] - 1 / base[key]) / extra
    return rows


def bench_ppo(
    n: int, steps_per_env: int, device: str, backend: str, iterations: int = 1, extra: tuple[str, ...] = ()
) -> dict:
    """PPO iterations (collect, then learn) with rsl_rl's runner at n worlds x steps_per_env, after one
    warm-up iteration (allocations, first kernels): the median collect and learn time of
    ``iterations``; ``extra``: config overrides (``ppo.policy.model=rnn``)."""
    cfg = compose_config(
        [
            f"env.num_envs={n}",
            f"env.device={device}",
            f"ppo.num_steps_per_env={steps_per_env}",
            f"env.sim.backend={backend}",
            *extra,
        ]
    )
    env = make_env(cfg)
    runner = NavRunner(env, build_train_cfg(cfg), None, str(env.device), infos={}, quiet=True)
    runner.learn(1)  # warm-up iteration
    times = []
    for _ in range(iterations):
        runner.learn(1)
        times.append(runner.last_times)
    collect = statistics.median(c for c, _ in times)
    learn = statistics.median(lr for _, lr in times)
    a = cfg.ppo.algorithm
    return {
        "backend": env.backend,
        "num_envs": n,
        "num_steps_per_env": steps_per_env,
        "model": str(cfg.ppo.policy.model),
        "overrides": list(extra),
        "transitions": n * steps_per_env,
        "num_learning_epochs": int(a.num_learning_epochs),
        "num_mini_batches": int(a.num_mini_batches),
        "gradient_steps": int(a.num_learning_epochs) * int(a.num_mini_batches),
        "iterations": iterations,
        "collect_s": collect,
        "learn_s": learn,
        "learn_s_per_gradient_step": learn / (int(a.num_learning_epochs) * int(a.num_mini_batches)),
        "iteration_s": collect + learn,
        "collect_over_learn": collect / learn,
        "times": [list(t) for t in times],
        "peak_host_mb": peak_host_mb(),
    }


def parse_shape(shape: str) -> tuple[int, int]:
    """``"4096x32"`` -> (4096, 32): worlds x steps per world; anything else is a one-line error."""
    n, sep, t = shape.lower().partition("x")
    if not (sep and n.isdigit() and t.isdigit() and int(n) > 0 and int(t) > 0):
        raise ValueError(f"shape {shape!r}: expected WORLDSxSTEPS with positive integers, e.g. 4096x32")
    return int(n), int(t)


def bench_ppo_shapes(device: str, backend: str, shapes: str, models: str, iterations: int) -> list[dict]:
    """``bench_ppo`` per shape (``"256x32,4096x32"``) and model (``"mlp,rnn"``); ``backend`` auto: warp
    on CUDA, mujoco on a CPU (the training's own choice)."""
    if backend == "auto":
        backend = "warp" if device.startswith("cuda") else "mujoco"
    parsed = [parse_shape(s) for s in shapes.split(",")]  # every shape checked before the first run
    rows = []
    for n, t in parsed:
        for model in models.split(","):
            rows.append(bench_ppo(n, t, device, backend, iterations, (f"ppo.policy.model={model}",)))
            print(f"[bench] ppo {n}x{t} {model} done", flush=True)
    return rows


def ppo_table(rows: list[dict]) -> str:
    """Markdown: one row per PPO shape and model, collect and learn per iteration."""
    lines = [
        "| backend | worlds x steps | transitions | model | epochs x mini-batches | collect s | learn s | "
        "learn ms / gradient step | collect / learn |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rows:
        lines.append(
            f"| {p['backend']} | {p['num_envs']} x {p['num_steps_per_env']} | {p['transitions']:,} | "
            f"{p['model']} | {p['num_learning_epochs']} x {p['num_mini_batches']} | {p['collect_s']:.2f} | "
            f"{p['learn_s']:.2f} | {1000 * p['learn_s_per_gradient_step']:.0f} | "
            f"{p['collect_over_learn']:.2f} |"
        )
    return "\n".join(lines)


def machine(device: str) -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "mujoco": mujoco.__version__,
        "device": device,
    }
    try:
        info["cpu_model"] = next(
            line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def format_table(result: dict) -> str:
    def k(v):
        return "-" if v is None else f"{v / 1000:,.1f}k"

    lines = [
        "| backend | worlds | physics | physics+LiDAR | full step | baseline physics | baseline phys+LiDAR | "
        "ratio phys | ratio phys+LiDAR | full / baseline | syncs/step | torch ops/step | first step s | "
        "peak host MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["worlds"]:
        ratio = [
            r.get(x) for x in ("ratio_physics", "ratio_physics_lidar", "ratio_full_vs_baseline_physics_lidar")
        ]
        lines.append(
            f"| {r['backend']} | {r['num_envs']} | {k(r['physics_sps'])} | {k(r['physics_lidar_sps'])} | "
            f"{k(r['full_step_sps'])} | "
            f"{k(r.get('baseline_physics_sps'))} | {k(r.get('baseline_physics_lidar_sps'))} | "
            + " | ".join("-" if x is None else f"{x:.2f}x" for x in ratio)
            + f" | {r['host_syncs_per_step']:.0f} | {r['torch_ops_per_step']:.0f}"
            + f" | {r['first_step_s']:.1f} | {r['peak_host_mb']:.0f} |"
        )
    if result.get("slots"):
        lines += [
            "",
            "| backend | worlds | wall slots | physics+LiDAR (walls standing) | full step (walls parked) | "
            "us/slot phys+LiDAR | us/slot full step |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in result["slots"]:
            per = [r.get("physics_lidar_us_per_slot"), r.get("full_step_us_per_slot")]
            lines.append(
                f"| {r['backend']} | {r['num_envs']} | {r['wall_slots']} | {k(r['physics_lidar_sps'])} | "
                f"{k(r['full_step_sps'])} | "
                + " | ".join("-" if x is None else f"{x:.2f}" for x in per)
                + " |"
            )
    for p in result.get("ppo", []):
        lines += [
            "",
            f"PPO iteration ({p['backend']}) at {p['num_envs']} x {p['num_steps_per_env']} "
            f"({p['transitions']:,} transitions): collect {p['collect_s']:.2f} s, learn {p['learn_s']:.2f} s "
            f"(collect/learn {p['collect_over_learn']:.2f})",
        ]
    return "\n".join(lines)


PROGRESS = re.compile(r"\[navexp\] it\s+(\d+)/\d+ \|\s+(\d+) steps/s \(collect ([\d.]+)s, learn ([\d.]+)s\)")


def measure(nproc: int, per_rank_envs: int, iterations: int, device: str, extra: list[str]) -> dict:
    """One torchrun training run; medians of its progress lines after the first iteration."""
    root = ROOT  # the repository: torchrun runs `-m navexp.train` from here
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            "-m",
            "navexp.train",
            "size=cpu",
            f"env.device={device}",
            f"env.num_envs={per_rank_envs}",
            f"ppo.max_iterations={iterations}",
            f"ppo.save_interval={iterations + 1}",
            "eval.enabled=false",
            f"hydra.run.dir={tmp}/run",
            *extra,
        ]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    rows = [m.groups() for m in PROGRESS.finditer(proc.stdout)]
    steady = _steady(proc.stdout)
    return {
        "nproc": nproc,
        "num_envs_per_rank": per_rank_envs,
        "num_envs_total": per_rank_envs * nproc,
        "iterations": len(rows),
        "steps_per_s": statistics.median(r[0] for r in steady),
        "collect_s": statistics.median(r[1] for r in steady),
        "learn_s": statistics.median(r[2] for r in steady),
        "wall_s": round(wall, 1),
        "load_avg_1min_before": load,
    }


def _steady(stdout: str) -> list[tuple[float, float, float]]:
    """(steps/s, collect s, learn s) of each progress line after the first iteration."""
    rows = [m.groups() for m in PROGRESS.finditer(stdout)]
    return [(float(s), float(c), float(lr)) for it, s, c, lr in rows if int(it) > 0] or [
        (float(s), float(c), float(lr)) for _, s, c, lr in rows
    ]


def measure_concurrent(
    k: int, num_envs: int, iterations: int, device: str, share: bool, extra: list[str]
) -> dict:
    """K independent trainings (``python -m navexp.train``, as K sweep trials or K users would start
    them) at once on this host; each one's median steps/s over its iterations 2..last, summed.
    ``share=False`` runs them with ``NAVEXP_SHARE_CORES=0`` (each takes every core)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "NAVEXP_SHARE_CORES": "1" if share else "0",
            "NAVEXP_CORES_DIR": f"{tmp}/cores",  # only these K count, not trainings outside the bench
        }
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        procs = []
        t0 = time.perf_counter()
        for i in range(k):
            cmd = [
                sys.executable, "-m", "navexp.train", "size=cpu", f"env.device={device}",
                f"env.num_envs={num_envs}", f"ppo.max_iterations={iterations}",
                f"ppo.save_interval={iterations + 1}", "eval.enabled=false", f"seed={i + 1}",
                f"hydra.run.dir={tmp}/run{i}", *extra,
            ]  # fmt: skip
            out = open(f"{tmp}/out{i}.txt", "w")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT)
            procs.append((cmd, out, proc))
        for cmd, out, proc in procs:
            proc.wait(timeout=3600)
            out.close()
            if proc.returncode != 0:
                text = Path(out.name).read_text()
                raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{text[-3000:]}")
        wall = time.perf_counter() - t0
        steady = [_steady(Path(out.name).read_text()) for _, out, _ in procs]
    per_process = [statistics.median(r[0] for r in rows) for rows in steady]
    return {
        "trainings": k,
        "share": share,
        "num_envs": num_envs,
        "steps_per_s_each": [round(x) for x in per_process],
        "steps_per_s_sum": sum(per_process),
        "learn_s_median": statistics.median(r[2] for rows in steady for r in rows),
        "wall_s": round(wall, 1),
        "load_avg_1min_before": load,
    }


def concurrent_table(rows: list[dict]) -> str:
    """Markdown rows; ``vs 1 alone``: the summed throughput against one training alone (same round)."""
    cols = "round | trainings at once | cores shared | steps/s each | sum steps/s | vs 1 alone | learn s"
    lines = [f"| {cols} | wall s | load |", "|---" * 9 + "|"]
    base = {r["round"]: r["steps_per_s_sum"] for r in rows if r["trainings"] == 1 and r["share"]}
    base_any = {r["round"]: r["steps_per_s_sum"] for r in rows if r["trainings"] == 1}
    for r in rows:
        ref = base.get(r["round"]) or base_any.get(r["round"])
        ratio = f"{r['steps_per_s_sum'] / ref:.2f}x" if ref else "-"
        each = ", ".join(str(x) for x in r["steps_per_s_each"])
        lines.append(
            f"| {r['round']} | {r['trainings']} | {'yes' if r['share'] else 'no'} | {each} | "
            f"{r['steps_per_s_sum']:.0f} | {ratio} | {r['learn_s_median']:.2f} | {r['wall_s']:.0f} | "
            f"{r['load_avg_1min_before']:.1f} |"
        )
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    """Markdown rows; ``vs 1 process``: against the 1-process run of the same round and world total."""
    cols = "round | processes | worlds per rank | worlds in all | total steps/s | collect s | learn s"
    lines = [f"| {cols} | vs 1 process | load |", "|---" * 9 + "|"]
    base = {(r["round"], r["num_envs_total"]): r["steps_per_s"] for r in rows if r["nproc"] == 1}
    for r in rows:
        ref = base.get((r["round"], r["num_envs_total"]))
        ratio = f"{r['steps_per_s'] / ref:.2f}x" if ref else "-"
        lines.append(
            f"| {r['round']} | {r['nproc']} | {r['num_envs_per_rank']} | {r['num_envs_total']} | "
            f"{r['steps_per_s']:.0f} | {r['collect_s']:.2f} | {r['learn_s']:.2f} | {ratio} | "
            f"{r['load_avg_1min_before']:.1f} |"
        )
    return "\n".join(lines)
