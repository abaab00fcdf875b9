"""``random``: the random sampler (cylinders and boxes of the env's ``obstacles`` settings), the default
family; its layouts are bit-identical to those of before map families."""

from __future__ import annotations

import torch

from navexp.sim.layout import Layout
from navexp.task.maps.families.base import MapSpec, register_family
from navexp.task.maps.random_family import LayoutSpec, sample_layouts


@register_family("random")
def random(maps: MapSpec, spec: LayoutSpec, k: int, src) -> tuple[Layout, torch.Tensor]:
    """The env's own obstacle counts and sizes (``env.obstacles``), start and goal with clearance."""
    return sample_layouts(spec, k, src)
