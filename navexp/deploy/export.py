"""Export a checkpoint's actor for deployment: TorchScript, ONNX, a numpy weight file and metadata.

    python -m navexp.export checkpoint=<run dir or model_<it>.pt> [out=DIR]

Writes into DIR (default <run dir>/export/):
- policy.pt: TorchScript (rsl_rl's export module: normalizer + network + mean action), input [N, W] -> [N, A]
  (A: the robot's action width, ``navexp.task.robots``); ``ppo.policy.model=rnn``: rsl_rl's stateful
  batch-1 module with ``reset()``
- policy.onnx: the same graph in ONNX, one file with its weights inside (input "obs", output "actions",
  dynamic batch); ``rnn``: the state is an input and an output as well ("h_in" -> "h_out", an LSTM's
  "c_in" -> "c_out", [L, N, H])
- policy.npz: weights (MLP head, GRU/LSTM or conv layers), normalizer statistics and metadata for
  navexp.deploy.NumpyPolicy (numpy only)
- policy_meta.json: observation layout (term order, widths and params, history), LiDAR geometry,
  scaling constants and the robot's action block (names, units, scale, frame), so a robot-side
  program can rebuild the input. Term descriptions come from the terms' numpy twins
  (``navexp/task/obs/numpy_terms.py``), which ``navexp.deploy`` computes the observation with.
Outputs are the raw mean actions; the env (and NumpyPolicy) clip them to [-1, 1] before scaling.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict

from navexp.config.cli import parse_command_line
from navexp.config.run_config import load_run_config
from navexp.learn.checkpoint import check_model, check_robot, load_policy
from navexp.learn.models import get_model
from navexp.learn.rl_cfg import build_actor
from navexp.sim import beam_angles
from navexp.sim.lidar import RealismSpec
from navexp.task.obs.numpy_terms import describe, get_twin
from navexp.task.obs.terms import OBS_TERMS
from navexp.task.robots import Robot, make_robot


def checkpoint_robot(ckpt: dict, cfg) -> Robot:
    """The robot the checkpoint was trained with (its config's ``env.robot``); a checkpoint whose
    recorded robot differs from it fails naming both."""
    robot = make_robot(cfg.env.robot)
    check_robot(ckpt, robot.name)
    return robot


def actor_from_checkpoint(ckpt: dict, cfg):
    """rsl_rl's actor of the checkpoint's ``ppo.policy.model``, built from its declared widths (no
    simulator)."""
    check_model(ckpt, str(cfg.ppo.policy.model))
    infos = ckpt.get("infos") or {}
    widths = infos.get("group_widths") or {"policy": ckpt["actor_state_dict"]["mlp.0.weight"].shape[1]}
    obs = TensorDict({g: torch.zeros(1, w) for g, w in widths.items()}, batch_size=[1])
    return build_actor(ckpt, cfg, obs, checkpoint_robot(ckpt, cfg).num_actions)


def _term_params(cfg, names: list[str]) -> dict[str, dict]:
    """Each term's resolved params as trained (defaults filled in from its signature)."""
    params = {}
    for name in names:
        tcfg = cfg.obs.terms.get(name)
        given = OmegaConf.to_container(tcfg.params) if tcfg is not None and "params" in tcfg else None
        params[name] = OBS_TERMS.get(name).resolve_params(given, "observation")
    return params


def model_meta(cfg) -> dict:
    """The network kind and what its registered ``ModelKind`` adds (an RNN: the state the caller carries)."""
    p = cfg.ppo.policy
    return {"kind": str(p.model), **get_model(str(p.model)).export_meta(p)}


def metadata(ckpt: dict, cfg) -> dict:
    """The deployment metadata: observation layout and term params, LiDAR geometry, scales, action."""
    infos = ckpt.get("infos") or {}
    env = cfg.env
    layout = infos.get("obs_layout", {}).get("policy")
    if layout is None:
        raise ValueError(f"checkpoint {ckpt['_path']} has no observation layout (not written by navexp)")
    names = [n for n, _ in layout]
    for name in names:
        get_twin(name)  # a term the robot cannot compute fails here, not on the robot
    width = sum(w for _, w in layout) * int(infos.get("history_length", 1))
    return {
        "checkpoint": ckpt["_path"],
        "iteration": int(ckpt["iter"]),
        "obs": {
            "group": "policy",
            "terms": [[n, int(w)] for n, w in layout],
            "history_length": int(infos.get("history_length", 1)),
            "width": width,
            "order": "terms in this order per frame; frames oldest first",
            "params": _term_params(cfg, names),
        },
        "lidar": {
            "num_beams": int(env.lidar.num_beams),
            "fov_deg": float(env.lidar.fov_deg),
            "max_range_m": float(env.lidar.max_range_m),
            "beam_angles_rad": beam_angles(env.lidar.num_beams, env.lidar.fov_deg).tolist(),
            "convention": "body frame, beam 0 forward, counter-clockwise; misses read max_range_m",
            "lidar_term": "range encoded into [0, 1] by obs.params.lidar.encoding (linear: range / "
            "max_range_m; log: log(range / log_min_m) / log(max_range_m / log_min_m))",
            "training_realism": RealismSpec.from_lidar_cfg(env.lidar).as_dict(),
        },
        "scales": {
            "goal_dist_scale_m": float(cfg.obs.terms.goal_polar.params.get("dist_scale_m", 5.0)),
            "max_lin_vel_mps": float(env.robot.max_lin_vel_mps),
            "max_ang_vel_radps": float(env.robot.max_ang_vel_radps),
        },
        "terms": {name: describe(name) for name in names},
        "action": checkpoint_robot(ckpt, cfg).action_meta(),
        "model": model_meta(cfg),
        "control_period_s": float(env.sim.timestep_s * env.sim.decimation),
    }


def export(ckpt: dict, cfg, out: Path) -> dict[str, Path]:
    """Write the four files; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    meta = metadata(ckpt, cfg)
    actor = actor_from_checkpoint(ckpt, cfg)
    files = {
        k: out / f
        for k, f in (
            ("torchscript", "policy.pt"),
            ("onnx", "policy.onnx"),
            ("numpy", "policy.npz"),
            ("meta", "policy_meta.json"),
        )
    }
    torch.jit.script(actor.as_jit()).save(str(files["torchscript"]))
    export_onnx(actor, meta["obs"]["width"], files["onnx"])
    norm = actor.obs_normalizer
    has_norm = hasattr(norm, "_mean")
    width = int(actor.obs_dim)  # the columns the normaliser reads (a CNN's scan columns are not among them)
    np.savez(
        files["numpy"],
        activation=str(cfg.ppo.policy.activation),
        obs_mean=norm._mean.squeeze(0).double().numpy() if has_norm else np.zeros(width),
        obs_std=norm._std.squeeze(0).double().numpy() if has_norm else np.ones(width),
        eps=float(norm.eps) if has_norm else 0.0,
        meta=json.dumps(meta),
        **numpy_arrays(actor, meta["model"]["kind"]),
    )
    files["meta"].write_text(json.dumps(meta, indent=2))
    return files


def export_onnx(actor, width: int, path: Path) -> None:
    """ONNX of the actor with a dynamic batch (torch's dynamo exporter; rsl_rl's own export fixes it
    to 1), one self-contained file: the weights are inside it (``external_data=False``; torch's default
    writes them to a ``<name>.data`` file beside it, and the graph alone then fails to load). An RNN's
    graph takes and returns its state: ``obs`` [N, W], ``h_in`` [L, N, H] (``c_in`` for an LSTM) ->
    ``actions`` [N, A], ``h_out`` (``c_out``); zeros start an episode."""
    onnx_model = actor.as_onnx(verbose=False).eval()
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    if getattr(onnx_model, "is_recurrent", False):
        args = tuple(
            torch.zeros(a.shape[0], 2, a.shape[2]) if i else torch.zeros(2, width)
            for i, a in enumerate(onnx_model.get_dummy_inputs())
        )
        names = onnx_model.input_names
        dynamic = {"obs": {0: batch}, **{n: {1: batch} for n in names[1:]}}
        inputs, outputs = names, onnx_model.output_names
    else:
        args, dynamic = (torch.zeros(2, width),), {"x": {0: batch}}
        inputs, outputs = ["obs"], ["actions"]
    torch.onnx.export(
        onnx_model,
        args,
        str(path),
        dynamo=True,
        opset_version=18,
        input_names=inputs,
        output_names=outputs,
        dynamic_shapes=dynamic,
        external_data=False,  # the actor is small (default MLP: 0.35 MB): far below protobuf's 2 GB limit
        verbose=False,
    )


def numpy_arrays(actor, kind: str) -> dict[str, np.ndarray]:
    """The weights ``navexp.deploy`` runs: the MLP head (``w<i>``, ``b<i>``) and the kind's own arrays
    (``ModelKind.numpy_weights``: an RNN's layers, a CNN's conv layers)."""
    linears = [m for m in actor.mlp if isinstance(m, torch.nn.Linear)]
    out = {"model": np.array(kind), "num_layers": np.array(len(linears))}
    out.update({f"w{i}": m.weight.detach().double().numpy() for i, m in enumerate(linears)})
    out.update({f"b{i}": m.bias.detach().double().numpy() for i, m in enumerate(linears)})
    dist = actor.distribution
    if isinstance(dist.input_dim, list):  # ppo.policy.state_dependent_std: the head outputs [mean; std] rows
        last, rows = len(linears) - 1, dist.output_dim
        out[f"w{last}"], out[f"b{last}"] = out[f"w{last}"][:rows], out[f"b{last}"][:rows]
    out.update(get_model(kind).numpy_weights(actor))
    return out


def main(argv: list[str] | None = None) -> dict[str, Path]:
    usage = "python -m navexp.export checkpoint=<run dir or model_<it>.pt> [out=DIR]"
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse_command_line(
        argv, {"checkpoint": None, "out": None}, usage, ("checkpoint",), overrides=False, about=__doc__
    ).options
    ckpt = load_policy(opts["checkpoint"])
    cfg = load_run_config(ckpt, [])
    out = Path(opts["out"]) if "out" in opts else Path(ckpt["_path"]).parent / "export"
    files = export(ckpt, cfg, out)
    for kind, path in files.items():
        print(f"[navexp] {kind:11s} {path}")
    print(f"[navexp] {UNGUARDED}")
    return files


UNGUARDED = (
    "note: policy.pt and policy.onnx do not check their input: NaN/inf in obs gives NaN or, through "
    "an RNN, a finite but meaningless action; build obs as NumpyPolicy does and check it is finite "
    "(docs/deploy.md#what-the-exported-graphs-do-not-check)"
)
"""The caveat ``main`` prints after the file list (NumpyPolicy guards its inputs; the graphs do not)."""
