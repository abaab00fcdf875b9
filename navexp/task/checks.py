"""The env config's value checks, shared by the env validation and the map families' own keys: each
failure is a ValueError naming the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any


def check(ok: bool, key: str, value: Any, allowed: str) -> None:
    """Raise ``env config: <key>=<value> is invalid; allowed: <allowed>`` unless ``ok``."""
    if not ok:
        raise ValueError(f"env config: {key}={value!r} is invalid; allowed: {allowed}")


def check_range(key: str, value: list, lo: float) -> None:
    """A ``[min, max]`` pair with ``lo <= min <= max``."""
    check(
        len(value) == 2 and lo <= value[0] <= value[1],
        key,
        list(value),
        f"[min, max] with {lo} <= min <= max",
    )
