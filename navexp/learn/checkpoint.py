"""Checkpoints: find them, load them safely, check they fit the env, write them atomically.

A checkpoint is rsl_rl's dict (``actor_state_dict``, ``critic_state_dict``, ``optimizer_state_dict``,
``iter``) plus ``infos`` written by navexp: ``obs_layout`` (term order and widths per group),
``group_widths``, ``obs_groups`` (actor/critic sets), ``history_length``, ``model`` (``kind``: the
``ppo.policy.model`` it was trained with) and the resolved ``config``.

Everything in it is a tensor or a plain container (dict, list, tuple, str, int, float, bool, None),
so it loads with ``torch.load(weights_only=True)`` and torch's default allowlist: ``SAFE_GLOBALS`` is
empty on purpose. A file that needs anything else (a pickled class or a callable) is refused with
the global it asked for, before any of it runs.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import os
import pickle
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from rsl_rl.utils import resolve_class, resolve_obs_groups

from navexp.learn.ppo_schema import nest_ppo
from navexp.task.obs.terms import OBS_TERMS

SAFE_GLOBALS: list = []
"""Globals allowed beyond torch's weights-only defaults: none (navexp writes only plain types)."""

REQUIRED_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")
_MODEL_RE = re.compile(r"model_(\d+)\.pt$")
_AVERAGED_RE = re.compile(r"model_(\d+)_avg(\d+)\.pt$")
WEIGHT_KEYS = ("actor_state_dict", "critic_state_dict")


def save_atomic(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file, fsync, then rename: a kill or a full disk never leaves a corrupt
    (or a half-written temporary) file, and the previous file at ``path`` stays intact.

    The bytes are serialized in memory first, so a failed write raises the OS error itself
    (``ENOSPC``, ``EDQUOT``, ``EROFS`` ...) rather than torch's zip writer's "unexpected pos".
    """
    buf = io.BytesIO()
    torch.save(obj, buf)
    write_atomic(path, buf.getbuffer())


def write_atomic(path: str | Path, data: bytes | memoryview | str) -> None:
    """Write ``data`` to ``path`` via a temporary file of its own + fsync + rename (+ fsync of the
    directory).

    The temporary file (``.<name>.<pid>.<random>.tmp`` in the same directory, so the rename stays on
    one filesystem) is unique per call: processes writing one path at once each publish a whole file,
    the last rename wins, and none removes or renames another's temporary file. It is created
    exclusively (``open(..., "xb")``) with the usual permissions (0666 minus the umask, unlike
    ``tempfile.mkstemp``'s 0600). On failure the temporary file is removed and OSError names the file
    and the OS error.
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    created = False
    try:
        with open(tmp, "xb") as f:
            created = True
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except OSError as e:
        if created:  # never another writer's file of the same (improbable) name
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        name = os.strerror(e.errno) if e.errno else type(e).__name__
        code = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "no errno"
        raise OSError(
            e.errno,
            f"could not write {path} ({code}: {name}); the temporary file was removed and "
            f"any previous {path.name} is unchanged",
        ) from e
    except BaseException:  # Ctrl-C, SIGTERM mid-write: no temporary file left behind either
        if created:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; some filesystems refuse fsync on a directory, which is harmless here."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def find_checkpoints(run_dir: Path) -> list[Path]:
    """``model_<it>.pt`` files of a run directory (or its ``checkpoints`` folder), by iteration."""
    files = [p for d in (run_dir, run_dir / "checkpoints") if d.is_dir() for p in d.glob("model_*.pt")]
    return sorted(
        (p for p in files if _MODEL_RE.search(p.name)), key=lambda p: int(_MODEL_RE.search(p.name)[1])
    )


def resolve_checkpoint(path: str | Path) -> Path:
    """A ``.pt`` file as given, or the latest ``model_<it>.pt`` of a run directory."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        found = find_checkpoints(p)
        if not found:
            raise FileNotFoundError(f"checkpoint: run directory {p} holds no model_<it>.pt")
        return found[-1]
    raise FileNotFoundError(f"checkpoint: {p} does not exist (give a model_<it>.pt file or a run directory)")


def averaged_policy_path(run_dir: Path, it: int, n: int) -> Path:
    """Where the average of the ``n`` checkpoints ending at iteration ``it`` goes: ``model_<it>_avg<n>.pt``
    (not a ``model_<it>.pt``, so resume never picks it)."""
    return run_dir / f"model_{it}_avg{n}.pt"


def resolve_policy(path: str | Path) -> Path:
    """The policy a run yields: a ``.pt`` file as given; for a run directory, the average of its last
    checkpoints (``model_<it>_avg<n>.pt``, written with ``ppo.average_checkpoints``) when one was made at
    its latest iteration, otherwise its latest ``model_<it>.pt``. Evaluate, export and play read this;
    resume reads ``resolve_checkpoint`` (the training state)."""
    latest = resolve_checkpoint(path)
    if Path(path).expanduser().is_file():
        return latest
    it = int(_MODEL_RE.search(latest.name)[1])
    averaged = [p for p in latest.parent.glob(f"model_{it}_avg*.pt") if _AVERAGED_RE.search(p.name)]
    averaged.sort(key=lambda p: p.stat().st_mtime)  # several (other ppo.average_checkpoints): the newest
    return averaged[-1] if averaged else latest


def load_policy(path: str | Path) -> dict:
    """``load_checkpoint`` of ``resolve_policy(path)``: what evaluate, export and play score or ship.
    A run directory whose run asked for an average (``ppo.average_checkpoints`` > 1) but holds none at
    its latest iteration (stopped before its end, or it saved one checkpoint) yields its latest
    checkpoint, and says so on stderr."""
    resolved = resolve_policy(path)
    ckpt = load_checkpoint(resolved)
    asked = int(((stored_config(ckpt).get("ppo") or {}).get("average_checkpoints")) or 1)
    if Path(path).expanduser().is_dir() and asked > 1 and _MODEL_RE.search(resolved.name):
        print(
            f"[navexp] {path}: its run asked for the average of its last {asked} checkpoints "
            f"(ppo.average_checkpoints={asked}) but holds none at iteration {ckpt['iter']} (it stopped "
            f"before its end, or saved one checkpoint); using {resolved.name}",
            file=sys.stderr,
            flush=True,
        )
    return ckpt


def stored_config(ckpt: dict) -> dict:
    """The experiment config a checkpoint's run recorded (``infos.config``; {} for older files), in
    today's shape: a run from before the ``ppo`` sections has its flat ``ppo`` keys moved into them."""
    config = dict((ckpt.get("infos") or {}).get("config") or {})
    if isinstance(config.get("ppo"), dict):
        config["ppo"] = nest_ppo(config["ppo"])
    return config


def later_checkpoints(run_dir: Path, ckpt: dict) -> list[Path]:
    """The ``model_<k>.pt`` and ``model_<k>_avg<n>.pt`` of ``run_dir`` (and its ``checkpoints`` folder)
    with k above the resumed checkpoint's iteration, by iteration, never the resumed file itself: what a
    resume from an earlier checkpoint would overwrite or leave behind as the run's latest (another
    branch's files)."""
    source = Path(ckpt["_path"]).resolve()
    later: list[tuple[int, Path]] = []
    for d in (run_dir, run_dir / "checkpoints"):
        for p in d.glob("model_*.pt") if d.is_dir() else ():
            m = _MODEL_RE.search(p.name) or _AVERAGED_RE.search(p.name)
            if m is not None and int(m[1]) > int(ckpt["iter"]) and p.resolve() != source:
                later.append((int(m[1]), p))
    return [p for _, p in sorted(later, key=lambda t: (t[0], t[1].name))]


def average_checkpoints(paths: list[Path]) -> dict:
    """The uniform average of the weights of several checkpoints of one run: every floating-point tensor
    of the actor and the critic (the observation normalizers' statistics included) is the mean over
    ``paths``; integer tensors (the normalizers' counts), ``iter`` and ``infos`` come from the last.
    The result is a policy, not a training state: its optimizer state is empty, and
    ``infos["averaged_from"]`` lists the iterations averaged (resume refuses it).
    Raises ValueError naming the file and the tensor when the checkpoints do not share one model."""
    if not paths:
        raise ValueError("average_checkpoints: no checkpoint to average")
    ckpts = [load_checkpoint(p) for p in paths]
    last = ckpts[-1]
    out = {"optimizer_state_dict": {}, "iter": last["iter"], "infos": copy.deepcopy(last.get("infos") or {})}
    for key in WEIGHT_KEYS:
        ours = last[key]
        for ck in ckpts[:-1]:
            theirs = ck[key]
            if set(theirs) != set(ours):
                diff = sorted(set(theirs) ^ set(ours))
                raise ValueError(
                    f"cannot average {ck['_path']} with {last['_path']}: {key} differs in tensors {diff}"
                )
            for name, t in theirs.items():
                if t.shape != ours[name].shape:
                    raise ValueError(
                        f"cannot average {ck['_path']} with {last['_path']}: {key}.{name} has shape "
                        f"{tuple(t.shape)} against {tuple(ours[name].shape)}"
                    )
        out[key] = {
            name: torch.stack([ck[key][name] for ck in ckpts]).mean(0) if torch.is_floating_point(t) else t
            for name, t in ours.items()
        }
    out["infos"]["averaged_from"] = [int(ck["iter"]) for ck in ckpts]
    return out


def write_averaged_policy(run_dir: Path, n: int, last: str | Path | None = None) -> Path | None:
    """Average the last ``n`` ``model_<it>.pt`` of ``run_dir`` up to ``last`` (the run's last checkpoint;
    a later file left by a run resumed from an earlier checkpoint is not its own) into
    ``model_<it>_avg<k>.pt`` (fewer if it holds fewer) and return its path; None when only one is there."""
    found = find_checkpoints(run_dir)
    named = _MODEL_RE.search(Path(last).name) if last is not None else None  # a resumed foreign file: no cut
    if named is not None:
        found = [p for p in found if int(_MODEL_RE.search(p.name)[1]) <= int(named[1])]
    found = found[-n:]
    if len(found) < 2:
        return None
    averaged = average_checkpoints(found)
    path = averaged_policy_path(run_dir, int(averaged["iter"]), len(found))
    save_atomic(averaged, path)
    return path


def check_resume_source(ckpt: dict, cfg) -> None:
    """What a resume needs of its checkpoint, checked before anything is built or written: a training
    state (not an averaged policy) of this config's ``ppo.policy.model``, no further on than
    ``ppo.max_iterations`` (else the run would record a budget below what its policy trained), of this
    config's robot (``robot=diffdrive`` on a holonomic run: refused before any env is built); a model
    mismatch names the run's recipe when this launch composes another one."""
    check_not_averaged(ckpt)
    check_robot(ckpt, str(cfg.env.robot.name))
    trained = int(ckpt.get("iter", -1)) + 1
    if int(cfg.ppo.max_iterations) < trained:
        raise ValueError(
            f"ppo.max_iterations={cfg.ppo.max_iterations} is below the {trained} iterations checkpoint "
            f"{ckpt.get('_path')} has trained; allowed: ppo.max_iterations >= {trained} ({trained}: nothing "
            f"more to train, only the final evaluation), or resume from an earlier checkpoint"
        )
    try:
        check_model(ckpt, str(cfg.ppo.policy.model))
    except ValueError as e:
        theirs, ours = stored_config(ckpt).get("recipe"), cfg.get("recipe")
        if theirs is not None and theirs != ours:
            raise ValueError(
                f"{e} (the run was trained with recipe={theirs}; this launch composes recipe={ours})"
            ) from None
        raise


def check_not_averaged(ckpt: dict) -> None:
    """Resume needs a training state: an averaged policy (``model_<it>_avg<n>.pt``) is refused."""
    its = (ckpt.get("infos") or {}).get("averaged_from")
    if its is not None:
        p = Path(ckpt["_path"])
        raise ValueError(
            f"checkpoint {p} is the average of the checkpoints of iterations {its}: a policy to evaluate, "
            f"export or play, not a training state (it has no optimizer state); resume from "
            f"{p.parent / f'model_{its[-1]}.pt'} or the run directory {p.parent}"
        )


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint on the CPU; a truncated or foreign file raises ValueError saying so."""
    p = resolve_checkpoint(path)
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # the weights-only unpickler stopped before running anything
        raise ValueError(_refusal(p, str(e))) from None
    except Exception as e:  # torch raises several types for truncated/foreign files
        raise ValueError(f"checkpoint {p} is not a loadable torch file ({type(e).__name__}: {e})") from e
    if not isinstance(ckpt, dict) or any(k not in ckpt for k in REQUIRED_KEYS):
        have = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(
            f"checkpoint {p} is not an rsl_rl/navexp checkpoint: needs keys {list(REQUIRED_KEYS)}, has {have}"
        )
    ckpt["_path"] = str(p)
    return ckpt


def _refusal(p: Path, torch_msg: str) -> str:
    """The reason the weights-only loader gave, without torch's advice to load it unsafely."""
    lines = [ln.strip() for ln in torch_msg.splitlines() if ln.strip()]
    glob = next((ln for ln in lines if "GLOBAL" in ln), None)
    if glob is not None:
        return (
            f"checkpoint {p} was refused: loading it needs code, not only tensors ({glob}); navexp "
            f"checkpoints hold only tensors and plain containers, and nothing in this file was executed"
        )
    why = next((ln for ln in lines if ln.startswith("Unsupported")), lines[0] if lines else "unknown")
    return (
        f"checkpoint {p} is not a loadable torch file (the weights-only loader stopped: {why}); "
        f"nothing in it was executed"
    )


def checkpoint_obs_layout(ckpt: dict) -> dict | None:
    return (ckpt.get("infos") or {}).get("obs_layout")


def check_compatible(ckpt: dict, obs_layout: dict, group_widths: dict[str, int], history_length: int) -> None:
    """Raise ValueError naming both layouts when the checkpoint's observations differ from the env's."""
    theirs = checkpoint_obs_layout(ckpt)
    their_hist = (ckpt.get("infos") or {}).get("history_length", 1)
    ours = {g: [list(t) for t in terms] for g, terms in obs_layout.items()}
    if theirs is not None:
        theirs = {g: [list(t) for t in terms] for g, terms in theirs.items()}
        if theirs.get("policy") != ours.get("policy") or their_hist != history_length:
            raise ValueError(
                f"checkpoint {ckpt['_path']} was trained on observation layout "
                f"{theirs} (history {their_hist}); "
                f"this config produces {ours} (history {history_length}). Use the same obs config."
            )
    if checkpoint_model(ckpt) != "mlp":  # an RNN's or CNN's first MLP layer reads its latent, not obs
        return
    width = ckpt["actor_state_dict"]["mlp.0.weight"].shape[1]
    if width != group_widths["policy"]:
        raise ValueError(
            f"checkpoint {ckpt['_path']} has an actor input of {width} columns; "
            f"this config's policy group is "
            f"{group_widths['policy']} wide ({ours['policy']}). Use the same obs config."
        )


def checkpoint_model(ckpt: dict) -> str:
    """The ``ppo.policy.model`` kind a checkpoint was trained with (``infos.model.kind``; older runs: mlp)."""
    return str(((ckpt.get("infos") or {}).get("model") or {}).get("kind", "mlp"))


def check_model(ckpt: dict, kind: str) -> None:
    """Raise ValueError naming both kinds when the checkpoint holds another ``ppo.policy.model`` than
    ``kind``."""
    theirs = checkpoint_model(ckpt)
    if theirs != kind:
        raise ValueError(
            f"checkpoint {ckpt['_path']} holds a ppo.policy.model={theirs!r} policy; this config uses "
            f"ppo.policy.model={kind!r}; select ppo.policy.model={theirs} (and its ppo.policy.rnn_*/"
            f"ppo.policy.cnn_* settings)"
        )


def check_robot(ckpt: dict, robot_name: str) -> None:
    """Raise ValueError naming both robots when the checkpoint was trained with another one."""
    recorded = (ckpt.get("infos") or {}).get("robot")
    if recorded is not None and recorded.get("robot") != robot_name:
        raise ValueError(
            f"checkpoint {ckpt['_path']} was trained with robot {recorded.get('robot')!r}; this config "
            f"uses {robot_name!r}; select robot={recorded.get('robot')}"
        )


MODEL_KEYS = (
    "ppo.policy.model",
    "ppo.policy.critic_model",
    "ppo.policy.rnn_type",
    "ppo.policy.rnn_hidden_dim",
    "ppo.policy.rnn_num_layers",
    "ppo.policy.cnn_channels",
    "ppo.policy.cnn_kernel_sizes",
    "ppo.policy.cnn_strides",
    "ppo.policy.hidden_dims",
    "ppo.policy.activation",
    "ppo.policy.obs_normalization",
    "ppo.policy.std_type",
    "ppo.actor_obs_groups",
    "ppo.critic_obs_groups",
    "obs.privileged_enabled",
    "obs.history_length",
)
"""Config keys that shape the models; a resume names those that differ from the checkpoint's run."""


def _config_diff(ckpt: dict, cfg) -> str:
    stored = stored_config(ckpt)
    if not stored:
        return ""
    theirs = OmegaConf.create(stored)
    diffs = []
    for key in MODEL_KEYS:
        a, b = OmegaConf.select(theirs, key), OmegaConf.select(cfg, key)
        a = OmegaConf.to_container(a) if OmegaConf.is_config(a) else a
        b = OmegaConf.to_container(b) if OmegaConf.is_config(b) else b
        if a != b:
            diffs.append(f"{key}: checkpoint {a!r}, this config {b!r}")
    return (" Differing settings: " + "; ".join(diffs) + ".") if diffs else ""


def _shape_diffs(theirs: dict, ours: dict) -> list[str]:
    out = [
        f"{k}: checkpoint {tuple(theirs[k].shape)}, this config {tuple(v.shape)}"
        for k, v in ours.items()
        if k in theirs and tuple(theirs[k].shape) != tuple(v.shape)
    ]
    out += [f"{k}: missing in the checkpoint" for k in ours if k not in theirs]
    out += [f"{k}: not in this config's model" for k in theirs if k not in ours]
    return out


def check_obs_params(ckpt: dict, groups: dict) -> None:
    """Raise ValueError when an observation term of this config reads the world differently from how
    the checkpoint's network was trained (``lidar``'s ``encoding``, a scale): the layout and widths would
    match and the policy would silently see other numbers. The trained params are the stored ones over
    the term function's defaults, as training resolved them (a run stored before a param existed read
    its default)."""
    stored = (stored_config(ckpt).get("obs") or {}).get("terms")
    if stored is None:
        return
    for term in (t for terms in groups.values() for t in terms if t.name in stored):
        trained = OBS_TERMS.get(term.name).resolve_params(
            (stored[term.name] or {}).get("params"), "observation"
        )
        changed = {k: (trained[k], v) for k, v in term.params.items() if trained.get(k) != v}
        if changed:
            k, (was, now) = next(iter(changed.items()))
            raise ValueError(
                f"checkpoint {ckpt['_path']} was trained with observation term '{term.name}' params "
                f"{trained}; this config gives {term.params}; resume with "
                f"obs.terms.{term.name}.params.{k}={was} (it is {now} here)"
            )


def check_resume(ckpt: dict, cfg, env, train_cfg: dict) -> None:
    """Everything a resume needs to fit, checked before anything is written: the policy observation
    layout, the observation groups and widths of actor and critic, and every model tensor's shape.
    Raises ValueError naming both sides (and the differing config keys when the checkpoint has them).
    """
    om = env.obs_manager
    check_robot(ckpt, env.robot.name)
    check_model(ckpt, str(cfg.ppo.policy.model))
    check_compatible(ckpt, om.layout(), om.group_widths, om.history_length)
    check_obs_params(ckpt, om.groups)
    infos = ckpt.get("infos") or {}
    hint = _config_diff(ckpt, cfg)
    theirs_groups = infos.get("obs_groups")
    ours_groups = {k: list(v) for k, v in train_cfg["obs_groups"].items()}
    if theirs_groups is not None and {k: list(v) for k, v in theirs_groups.items()} != ours_groups:
        raise ValueError(
            f"checkpoint {ckpt['_path']} was trained with observation groups {theirs_groups}; this "
            f"config uses {ours_groups}; resume with the same obs and ppo settings.{hint}"
        )
    theirs_widths = infos.get("group_widths")
    if theirs_widths is not None and dict(theirs_widths) != dict(om.group_widths):
        raise ValueError(
            f"checkpoint {ckpt['_path']} has observation group widths {dict(theirs_widths)}; this "
            f"config produces {dict(om.group_widths)}; resume with the same obs settings.{hint}"
        )
    obs = env.get_observations()
    groups = resolve_obs_groups(obs, copy.deepcopy(train_cfg["obs_groups"]), ["actor", "critic"])
    diffs = []
    for key, role, outputs in (
        ("actor_state_dict", "actor", env.num_actions),
        ("critic_state_dict", "critic", 1),
    ):
        cls, kwargs = resolve_class(train_cfg[role])
        model = cls(obs, groups, role, outputs, **kwargs)
        diffs += [f"{role} {d}" for d in _shape_diffs(ckpt[key], model.state_dict())]
    if diffs:
        raise ValueError(
            f"checkpoint {ckpt['_path']} does not fit this config's models: "
            + "; ".join(diffs[:6])
            + (f" (and {len(diffs) - 6} more)" if len(diffs) > 6 else "")
            + f". Resume with the settings it was trained with.{hint}"
        )
