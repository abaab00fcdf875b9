"""Configs of stored runs: a checkpoint's training config with a command line's overrides, and the
evaluation config derived from a training config (held-out layouts, no auto-reset)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict

from navexp.config.aliases import translate_overrides
from navexp.config.api import compose_config
from navexp.config.cli import group_package, override_keys
from navexp.config.presets import preset_values
from navexp.learn.checkpoint import stored_config
from navexp.paths import CONFIG_DIR


def load_run_config(ckpt: dict, overrides: list[str]) -> DictConfig:
    """The checkpoint's training config, with the command line's group choices and keys applied.

    A key override replaces that key; a group override (``env=dense``) replaces the group's node; a
    size preset (``size=cpu``) sets the keys the preset sets. All values come from composing the
    app's config with the same overrides. A ``recipe=`` is refused: it sets how a policy is trained.
    ``env=<name>`` changes the world, not the robot: the run's ``env.robot`` (its drive, size and
    safety filter) and ``env.lidar`` (beams and realism) stay, with the command line's own keys
    (``env.robot.*``, ``env.lidar.*``) applied on top; ``robot=...`` swaps the robot.
    """
    overrides = translate_overrides(overrides)
    composed = compose_config(overrides)
    stored = stored_config(ckpt) or None  # in today's shape (a flat ``ppo`` of old moved into sections)
    if "recipe" in override_keys(overrides):
        trained = (stored or {}).get("recipe", "none")
        raise ValueError(
            f"recipe={composed.recipe} cannot apply to a trained run: a recipe sets how a policy is trained "
            f"(its observations, reward, model and update; this run's recipe: {trained}). Leave recipe= out; "
            "to score the run on other maps pass env=<name> or suite=<name>"
        )
    if stored is None:
        return composed
    # Keys added to the schema since the run was trained take their defaults; the run's own values win.
    defaults = compose_config([])
    OmegaConf.set_struct(defaults, False)
    cfg = OmegaConf.merge(defaults, OmegaConf.create(stored))
    _stored_term_params(cfg, stored)
    keys = set()
    for key in override_keys(overrides):
        package = group_package(key) if (CONFIG_DIR / key).is_dir() else key
        if package == "_global_":  # a preset group (size=cpu): it sets keys all over the config
            keys |= {key, *preset_values(str(OmegaConf.select(composed, key)))}
        else:  # a key, or a group's node where the group lands (robot=diffdrive -> env.robot)
            keys.add(package)
    kept = {  # env=<name> swaps the world around the run's robot and sensor (unless robot= swaps it)
        part: OmegaConf.to_container(cfg.env[part], resolve=False)
        for part in ROBOT_PARTS
        if "env" in keys and f"env.{part}" not in keys
    }
    with open_dict(cfg):
        for key in sorted(keys):  # every value is the composed one, so the order does not matter
            OmegaConf.update(cfg, key, OmegaConf.select(composed, key), merge=False)
        for part, node in kept.items():
            OmegaConf.update(cfg, f"env.{part}", node, merge=True)  # into the group's typed node
            for key in sorted(k for k in keys if k.startswith(f"env.{part}.")):  # its keys given here
                OmegaConf.update(cfg, key, OmegaConf.select(composed, key), merge=False)
    return cfg


ROBOT_PARTS = ("robot", "lidar")
"""The parts of ``env`` that are the robot, not its world: an ``env=<name>`` override keeps the run's."""


def _stored_term_params(cfg: DictConfig, stored: dict) -> None:
    """Give every observation and reward term of the stored run exactly the params it was trained with.

    A term function read a param missing from its config as the function's own default, which is what
    it reads today (a term's signature defaults keep their old meaning: ``lidar``'s ``encoding`` is
    ``linear``). Merging today's YAML into the stored params would instead hand an old run today's
    choices (``configs/obs/nav.yaml``'s ``encoding: log``) and evaluate a linear-trained policy on a
    log scan. Terms the run's config did not hold at all keep today's node (new terms ship disabled).
    """
    with open_dict(cfg):
        for section in ("obs", "reward"):
            terms = (stored.get(section) or {}).get("terms") or {}
            for name, tcfg in terms.items():
                params = (tcfg or {}).get("params") or {}
                OmegaConf.update(cfg, f"{section}.terms.{name}.params", dict(params), merge=False)


def eval_env_cfg(cfg: DictConfig) -> DictConfig:
    """The training config with evaluation settings: held-out layouts, auto_reset off, eval world count,
    and the free-path check on unless the config turns it off (it records each layout's shortest path,
    which SPL and the BARN score need)."""
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
            if cfg.env.maps.get("check_path") is None:
                cfg.env.maps.check_path = True
    return cfg
