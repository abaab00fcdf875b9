"""A keyed registry of term functions ``(state, **params) -> tensor``, shared by obs and rewards.

Parameters are checked against the function's signature when a config is built, so a misspelled or
missing parameter fails before any simulation runs, with the term's signature in the message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Term:
    """A registered term: its function plus whatever the registry's kind attaches (``meta``)."""

    name: str
    fn: Callable[..., Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def signature(self) -> str:
        params = list(inspect.signature(self.fn).parameters.values())[1:]
        return f"{self.name}({', '.join(str(p) for p in params)})"

    def default_params(self) -> dict[str, Any]:
        """The parameters that have defaults, with their default values."""
        sig = list(inspect.signature(self.fn).parameters.values())[1:]
        return {p.name: p.default for p in sig if p.default is not inspect.Parameter.empty}

    def resolve_params(self, params: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
        """Merge ``params`` over the function's defaults; raise TypeError on unknown or missing ones."""
        params = dict(params or {})
        sig = list(inspect.signature(self.fn).parameters.values())[1:]  # the first one is the state
        names = {p.name for p in sig}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(
                f"{kind} term '{self.name}' has no parameter(s) {unknown}; signature: {self.signature}"
            )
        missing = [p.name for p in sig if p.default is inspect.Parameter.empty and p.name not in params]
        if missing:
            raise TypeError(
                f"{kind} term '{self.name}' needs parameter(s) {missing}; signature: {self.signature}"
            )
        return {p.name: params.get(p.name, p.default) for p in sig}


def check_term_keys(kind: str, name: str, tcfg: Any, allowed: tuple[str, ...]) -> None:
    """Reject keys a term config may not have (Hydra's ``+key=`` can add them past the schema)."""
    extra = sorted(set(tcfg.keys()) - set(allowed)) if tcfg is not None else []
    if extra:
        raise ValueError(
            f"{kind} term '{name}' config has unknown key(s) {extra}; allowed: {list(allowed)}"
            + (" (a term's group follows from its provenance, not from YAML)" if "group" in extra else "")
        )


class Registry:
    """Terms of one kind, keyed by name, in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._terms: dict[str, Term] = {}

    def register(self, name: str, **meta: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register ``fn`` under ``name``; a duplicate name raises."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._terms:
                raise ValueError(f"{self.kind} term '{name}' is already registered")
            self._terms[name] = Term(name, fn, meta)
            return fn

        return deco

    def get(self, name: str) -> Term:
        if name not in self._terms:
            raise KeyError(f"unknown {self.kind} term '{name}'; available: {sorted(self._terms)}")
        return self._terms[name]

    def names(self) -> list[str]:
        return list(self._terms)

    def __contains__(self, name: str) -> bool:
        return name in self._terms
