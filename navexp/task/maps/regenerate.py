"""Regenerate layouts from their ids (family, seed): what evaluation and analysis need to redraw a map."""

from __future__ import annotations

import torch

from navexp.sim.layout import Layout
from navexp.task.maps.families import FAMILIES, MapSpec, family_index, generate
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.random_source import HashSource


def generate_layouts(
    maps: MapSpec, spec: LayoutSpec, family: str, seeds: torch.Tensor
) -> tuple[Layout, torch.Tensor]:
    """The layouts with ids (``family``, ``seeds`` [K] long) and which are valid [K] bool: the same
    layouts the pool hands out under ``maps.rng='hashed'`` (on any device, in any batch)."""
    if family not in FAMILIES:
        raise ValueError(f"map family {family!r} is unknown; allowed: {' | '.join(FAMILIES)}")
    lay, valid = generate(maps, spec, family, seeds.numel(), HashSource(family_index(family), seeds))
    lay.seed = seeds.clone()
    return lay, valid
