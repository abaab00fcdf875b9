"""Build observation groups from the ``obs`` config: term selection, width checks, frame stacking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict

from navexp.task.obs.numpy_terms import history_steps
from navexp.task.obs.terms import GROUP_OF, OBS_TERMS
from navexp.task.registry import check_term_keys
from navexp.task.state import EnvDims, NavState


@dataclass
class BoundObsTerm:
    name: str
    group: str
    fn: Any
    params: dict[str, Any]
    width: int
    reads: tuple[str, ...] = ()


def resolve_obs_terms(obs_cfg, dims: EnvDims) -> dict[str, list[BoundObsTerm]]:
    """Return the enabled terms per group, in registry order; raise on unknown terms or params."""
    for name in obs_cfg.terms:
        OBS_TERMS.get(name)  # KeyError listing the available terms
    groups: dict[str, list[BoundObsTerm]] = {"policy": []}
    if obs_cfg.privileged_enabled:
        groups["privileged"] = []
    for name in OBS_TERMS.names():
        term = OBS_TERMS.get(name)
        tcfg = obs_cfg.terms.get(name)
        check_term_keys("observation", name, tcfg, ("enabled", "params"))
        enabled = tcfg.enabled if tcfg is not None else term.meta["enabled"]
        params = term.resolve_params(tcfg.params if tcfg is not None else None, "observation")
        group = GROUP_OF[term.meta["provenance"]]
        if not enabled or group not in groups:
            continue
        width = int(term.meta["width"](params, dims))
        reads = tuple(term.meta.get("reads", ()))
        groups[group].append(BoundObsTerm(name, group, term.fn, params, width, reads))
    for group, terms in groups.items():
        if not terms:
            raise ValueError(
                f"observation group '{group}' has no enabled terms; enable one of "
                f"{[n for n in OBS_TERMS.names() if GROUP_OF[OBS_TERMS.get(n).meta['provenance']] == group]}"
            )
    return groups


class ObservationManager:
    """Computes the groups every step; widths are declared up front and checked on every call."""

    def __init__(self, obs_cfg, dims: EnvDims, num_envs: int, device: torch.device) -> None:
        if obs_cfg.history_length < 1:
            raise ValueError(
                f"obs.history_length={obs_cfg.history_length} is invalid; allowed: an integer >= 1"
            )
        self.groups = resolve_obs_terms(obs_cfg, dims)
        self.history_length = int(obs_cfg.history_length)
        self.num_envs, self.device = num_envs, device
        self.frame_widths = {g: sum(t.width for t in terms) for g, terms in self.groups.items()}
        self._history = {
            g: torch.zeros(num_envs, self.history_length, w, device=device)
            for g, w in self.frame_widths.items()
        }

    @property
    def scan_history_steps(self) -> int:
        """Control steps of earlier scans the active ``lidar_history`` terms read (0: none)."""
        return max(
            (history_steps(t.params) for ts in self.groups.values() for t in ts if t.name == "lidar_history"),
            default=0,
        )

    @property
    def reads(self) -> set[str]:
        """On-demand NavState fields the active terms read."""
        return {f for terms in self.groups.values() for t in terms for f in t.reads}

    @property
    def group_widths(self) -> dict[str, int]:
        """Declared width of each group (frame width x history length)."""
        return {g: w * self.history_length for g, w in self.frame_widths.items()}

    def layout(self) -> dict[str, list[tuple[str, int]]]:
        """Term order and widths of one frame per group (for checkpoints and export)."""
        return {g: [(t.name, t.width) for t in terms] for g, terms in self.groups.items()}

    def zeros(self) -> TensorDict:
        """Groups of zeros with the declared widths."""
        return TensorDict(
            {g: torch.zeros(self.num_envs, w, device=self.device) for g, w in self.group_widths.items()},
            batch_size=[self.num_envs],
        )

    def _frame(self, group: str, state: NavState) -> torch.Tensor:
        parts = []
        for t in self.groups[group]:
            out = t.fn(state, **t.params)
            if out.shape != (self.num_envs, t.width):
                raise RuntimeError(
                    f"observation term '{t.name}' returned shape {tuple(out.shape)}, declared "
                    f"({self.num_envs}, {t.width}); a term must return exactly its declared width"
                )
            parts.append(out)
        return torch.cat(parts, dim=-1)

    def compute(self, state: NavState, reset_mask: torch.Tensor | None = None) -> TensorDict:
        """Push the current frame into each group's history; worlds in ``reset_mask`` [N] restart
        theirs (a masked write, no host sync)."""
        out = {}
        for g, hist in self._history.items():
            frame = self._frame(g, state)
            if self.history_length > 1:
                hist[:, :-1] = hist[:, 1:].clone()
            hist[:, -1] = frame
            if reset_mask is not None and self.history_length > 1:
                # A new episode has no past: repeat its first frame.
                hist.copy_(torch.where(reset_mask[:, None, None], frame.unsqueeze(1), hist))
            out[g] = hist.reshape(self.num_envs, -1).clone()
        return TensorDict(out, batch_size=[self.num_envs])
