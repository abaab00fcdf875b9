"""A training beside an evaluation (``python -m navexp.bench_dist beside=evaluate``): the training's env
steps per second alone and with ``python -m navexp.evaluate`` running in a loop beside it, measured
side by side in one run, with core sharing (``navexp/learn/cores.py``) and without it.

Each training is ``python -m navexp.train size=cpu env.num_envs=<num_envs> ppo.max_iterations=<its>
eval.enabled=false`` (the median steps/s of its progress lines after the first iteration); the
evaluation is ``python -m navexp.evaluate checkpoint=<a 1-iteration run> env=dense
eval.num_episodes=400``, restarted whenever it ends, started before the training and stopped after it.
The children run without ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` (as a user's shell has them) and count
only each other (their own ``NAVEXP_CORES_DIR``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from navexp.analysis.benchmark import _steady
from navexp.paths import ROOT

EVALUATION = ("env=dense", "eval.num_episodes=400")
"""The evaluation run beside the training (the issue's probe: dense, 400 episodes, in a loop)."""


def _env(tmp: str, share: bool) -> dict:
    """The children's environment: this repository first, sharing on or off, their own registry, and no
    thread-count variables (each process picks its threads itself, as for a user)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env["NAVEXP_SHARE_CORES"] = "1" if share else "0"
    env["NAVEXP_CORES_DIR"] = f"{tmp}/cores"
    return env


def _train(tmp: str, name: str, env: dict, overrides: list[str]) -> str:
    """Run one ``python -m navexp.train`` in ``<tmp>/<name>`` to its end; its output (fails naming it)."""
    cmd = [sys.executable, "-m", "navexp.train", "size=cpu", f"hydra.run.dir={tmp}/{name}", *overrides]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return proc.stdout


class EvaluationLoop:
    """``python -m navexp.evaluate`` of ``run_dir``, restarted whenever it ends, until ``stop``."""

    def __init__(self, tmp: str, run_dir: str, env: dict) -> None:
        self.cmd = [sys.executable, "-m", "navexp.evaluate", f"checkpoint={run_dir}", *EVALUATION]
        self.cmd.append(f"out={tmp}/beside_eval.json")
        self.tmp, self.env = tmp, env
        self.finished = 0
        """Evaluations that ran to their end while the loop ran."""
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with open(f"{self.tmp}/beside_eval.txt", "w") as out:
                self._proc = subprocess.Popen(
                    self.cmd, cwd=self.tmp, env=self.env, stdout=out, stderr=subprocess.STDOUT
                )
                if self._proc.wait() == 0:
                    self.finished += 1
                elif not self._stop.is_set():
                    text = Path(out.name).read_text()[-3000:]
                    raise RuntimeError(f"{' '.join(self.cmd)} failed:\n{text}")

    def start(self) -> EvaluationLoop:
        """Start the loop and wait until its first evaluation is registered (up to 60 s; 20 s without
        sharing, where nothing registers)."""
        self._thread.start()
        cores = Path(self.tmp) / "cores"
        wait_s = 60 if self.env["NAVEXP_SHARE_CORES"] == "1" else 20
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not (cores.is_dir() and any(cores.iterdir())):
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        """Stop the running evaluation and the loop."""
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
        self._thread.join(timeout=60)


def measure_beside(num_envs: int, iterations: int, device: str, share: bool, extra: list[str]) -> dict:
    """One training alone, then the same training beside an evaluation loop; each one's median steps/s
    over iterations 2..last, and the second against the first."""
    train = [
        f"env.device={device}", f"env.num_envs={num_envs}", f"ppo.max_iterations={iterations}",
        f"ppo.save_interval={iterations + 1}", "eval.enabled=false", *extra,
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(tmp, share)
        policy = [f"env.device={device}", "env.num_envs=16", "ppo.max_iterations=1", "eval.enabled=false"]
        _train(tmp, "policy", env, policy)
        alone = _steady(_train(tmp, "alone", env, train))
        loop = EvaluationLoop(tmp, f"{tmp}/policy", env).start()
        try:
            beside = _steady(_train(tmp, "beside", env, train))
        finally:
            loop.stop()
    solo = statistics.median(r[0] for r in alone)
    with_eval = statistics.median(r[0] for r in beside)
    return {
        "share": share,
        "num_envs": num_envs,
        "steps_per_s_alone": round(solo),
        "steps_per_s_beside_evaluation": round(with_eval),
        "ratio": round(with_eval / solo, 3),
        "learn_s_alone": statistics.median(r[2] for r in alone),
        "learn_s_beside": statistics.median(r[2] for r in beside),
        "evaluations_finished": loop.finished,
    }


def beside_rows(
    shares: list[bool], repeats: int, num_envs: int, iterations: int, device: str, extra: list[str]
) -> list[dict]:
    """``measure_beside`` for each sharing mode, ``repeats`` rounds interleaved; each row printed."""
    rows = []
    for k in range(repeats):
        for share in shares:
            rows.append({"round": k + 1, **measure_beside(num_envs, iterations, device, share, extra)})
            print(f"[bench_dist] {rows[-1]}", flush=True)
    return rows


def beside_table(rows: list[dict]) -> str:
    """Markdown rows: the training alone, beside the evaluation loop, and the ratio (fair share: 0.5x on
    2 cores)."""
    cols = "round | cores shared | steps/s alone | steps/s beside evaluate | ratio | learn s alone | beside"
    lines = [f"| {cols} | evaluations finished |", "|---" * 8 + "|"]
    for r in rows:
        lines.append(
            f"| {r['round']} | {'yes' if r['share'] else 'no'} | {r['steps_per_s_alone']} | "
            f"{r['steps_per_s_beside_evaluation']} | **{r['ratio']:.2f}x** | {r['learn_s_alone']:.2f} | "
            f"{r['learn_s_beside']:.2f} | {r['evaluations_finished']} |"
        )
    return "\n".join(lines)
