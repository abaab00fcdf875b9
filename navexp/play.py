"""Replay a checkpoint: deterministic held-out rollouts, the evaluation metrics, trajectory plots.

    python -m navexp.play checkpoint=<run dir or model_<it>.pt> [episodes=16] [env=dense] [out=DIR]
                          [beam_every=10] [video=false|true|gif|mp4] [fps=10] [video_episodes=4]
                          [max_frames=300] [video_lidar=true] [any config override]

Writes into DIR (default <run dir>/play/): metrics.json, grid.png (up to 16 episodes), one
failed_<n>_<reason>.png per failed episode, trajectories.npz (paths, scans, layouts and the scene: a
figure can be redrawn from it alone, ``plots.redraw_from_npz``) and, with ``video=true``, episodes.gif
(the first ``video_episodes`` episodes animated; ``video=mp4``: episodes.mp4, needs ffmpeg).
With a scenario file of more than 16 entries and no ``episodes=``, every entry plays once; an
``episodes=`` below the entries is refused, naming those never played.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from navexp.analysis.eval_record import evaluation_record
from navexp.analysis.plots import save_trajectories, scene_info, write_plots
from navexp.analysis.rollout import EvalRun, evaluate
from navexp.analysis.suites import summary
from navexp.analysis.video import write_episode_video
from navexp.config.cli import parse_command_line, run_tool
from navexp.config.run_config import load_run_config
from navexp.config.suites import check_scenario_episodes
from navexp.experiment.console import third_party_warnings
from navexp.learn.checkpoint import load_policy
from navexp.task.maps.scenario_files import resolve_scenario_path, scenario_entry_names

OPTIONS = {
    "checkpoint": None,
    "episodes": "16",
    "out": None,
    "beam_every": "10",
    "video": "false",
    "fps": "10",
    "video_episodes": "4",
    "max_frames": "300",
    "video_lidar": "true",
}
USAGE = (
    "python -m navexp.play checkpoint=<run dir or model_<it>.pt> [episodes=16] [out=DIR] [beam_every=10] "
    "[video=false|true|gif|mp4] [fps=10] [video_episodes=4] [max_frames=300] [video_lidar=true|false] "
    "[config overrides]"
)
VIDEO_CHOICES = {"false": None, "true": "gif", "gif": "gif", "mp4": "mp4"}
"""``video=`` values and the format each writes (true: the GIF, which needs no ffmpeg)."""


def _choice(opts: dict[str, str], key: str, choices) -> str:
    """The option's value, lower-cased; a value outside ``choices`` fails naming both."""
    value = opts[key].lower()
    if value not in choices:
        raise ValueError(f"{key}={opts[key]!r} is invalid; allowed: {' | '.join(choices)}")
    return value


def _number(opts: dict[str, str], key: str, kind: type, lo: float):
    """The option as ``kind`` (int or float) >= ``lo``; anything else fails naming the value."""
    try:
        value = kind(opts[key])
    except ValueError:
        value = None
    if value is None or value < lo:
        raise ValueError(f"{key}={opts[key]!r} is invalid; allowed: {kind.__name__} >= {lo}")
    return value


def video_options(opts: dict[str, str]) -> dict | None:
    """The video settings of a play command line (None: no video); bad values fail before any rollout."""
    fmt = VIDEO_CHOICES[_choice(opts, "video", VIDEO_CHOICES)]
    settings = {
        "fps": _number(opts, "fps", float, 0.1),
        "episodes": _number(opts, "video_episodes", int, 1),
        "max_frames": _number(opts, "max_frames", int, 1),
        "lidar": _choice(opts, "video_lidar", ("true", "false")) == "true",
    }
    return None if fmt is None else {"format": fmt, **settings}


def check_play_folder(out: Path, run_dir: Path) -> None:
    """Before any episode: ``out`` is a folder a play may fill (it replaces the figures of an earlier
    play there), not the run directory or its ``plots/`` (the training's final-evaluation figures)."""
    if out.resolve() in (run_dir.resolve(), (run_dir / "plots").resolve()):
        raise ValueError(
            f"out={str(out)!r} holds the run's own files (the training's evaluation figures), which a play "
            f"would replace; allowed: a folder of its own (default {run_dir / 'play'})"
        )
    if out.exists() and not out.is_dir():
        raise ValueError(f"out={str(out)!r} is a file; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"out={str(out)!r} cannot be made: {e.strerror}") from None


def main(argv: list[str] | None = None) -> dict:
    """CLI: replay ``episodes`` held-out episodes of a checkpoint; write plots, metrics and trajectories."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_command_line(argv, OPTIONS, USAGE, ("checkpoint",), about=__doc__)
    opts, overrides = args.options, args.overrides
    episodes_n = _number(opts, "episodes", int, 1)
    beam_every = _number(opts, "beam_every", int, 1)
    video = video_options(opts)
    ckpt = load_policy(opts["checkpoint"])
    cfg = load_run_config(ckpt, [*overrides, f"eval.num_episodes={episodes_n}"])
    scenarios = cfg.env.get("scenarios")
    if scenarios and not any(a.startswith("episodes=") for a in argv):  # the default plays every entry once
        entries = len(scenario_entry_names(resolve_scenario_path(str(scenarios))))
        if entries > episodes_n:
            episodes_n = cfg.eval.num_episodes = entries
    check_scenario_episodes(cfg, "episodes")
    out = Path(opts["out"]) if "out" in opts else Path(ckpt["_path"]).parent / "play"
    check_play_folder(out, Path(ckpt["_path"]).parent)
    ev = EvalRun.build(ckpt, cfg)
    with third_party_warnings(bool(cfg.get("verbose", False))):
        metrics, episodes = evaluate(ev.actor, ev.env, episodes_n, record=True, label="play")
        metrics.update(evaluation_record(cfg, ckpt["_path"], overrides))
        info = scene_info(ev.env)
        for old in out.glob("episodes.*"):  # an earlier play's video: this play writes its own, or none
            old.unlink()
        files = write_plots(episodes, info, out, beam_every)
        save_trajectories(episodes, info, out / "trajectories.npz")
        if video is not None:
            files.append(write_episode_video(episodes, info, out, video))
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
        print(summary(metrics))
        print(
            f"[navexp] wrote {len(files)} plots/videos, metrics.json (every metric) and trajectories.npz "
            f"to {out}"
        )
    return metrics


def cli() -> None:
    """Console script ``navexp-play``: bad input ends in one line, exit status 2."""
    run_tool(main)


if __name__ == "__main__":
    cli()
