"""Device-aware size presets: the GPU reference setup and a CPU-sized one for 2-core machines.

A preset only fills keys the user did not set on the command line; ``size=none`` keeps the
composed config as it is.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict

SIZE_PRESETS: dict[str, dict[str, object]] = {
    # Reference setup (shared design.md): 4096 worlds x 32 steps = 131,072 transitions per iteration.
    "gpu": {
        "env.num_envs": 4096,
        "ppo.num_steps_per_env": 32,
        "ppo.num_mini_batches": 4,
        "ppo.max_iterations": 1000,
        "ppo.save_interval": 100,
        "eval.num_episodes": 1000,
    },
    # About 15 minutes on a 2-core CPU: 256 worlds x 32 steps = 8,192 transitions per iteration.
    "cpu": {
        "env.num_envs": 256,
        "ppo.num_steps_per_env": 32,
        "ppo.num_mini_batches": 4,
        "ppo.max_iterations": 350,
        "ppo.save_interval": 50,
        "eval.num_episodes": 200,
    },
}


def resolve_size(size: str, device: str) -> str:
    """``auto`` -> ``gpu`` on a CUDA device, else ``cpu``; ``gpu``/``cpu``/``none`` pass through."""
    if size not in ("auto", "gpu", "cpu", "none"):
        raise ValueError(f"size={size!r} is invalid; allowed: auto | gpu | cpu | none")
    if size == "auto":
        return "gpu" if device.startswith("cuda") else "cpu"
    return size


def overridden_keys(overrides: list[str]) -> set[str]:
    """Config keys named in Hydra command-line overrides (``+a.b=1`` -> ``a.b``)."""
    keys = set()
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        keys.add(key)
    return keys


def apply_size_preset(cfg: DictConfig, size: str, overrides: list[str]) -> dict[str, object]:
    """Write the preset's values into ``cfg`` except where the user overrode them; return what was set."""
    if size == "none":
        return {}
    user = overridden_keys(overrides)
    applied = {}
    with open_dict(cfg):
        for key, value in SIZE_PRESETS[size].items():
            if key not in user:
                OmegaConf.update(cfg, key, value, merge=False)
                applied[key] = value
    return applied
