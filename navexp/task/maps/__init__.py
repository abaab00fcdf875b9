"""Map families and map files: structured layouts generated per world on the device (corridor,
staggered, cul_de_sac, cluttered, grid, next to the random sampler), their free-path check and
shortest path on an occupancy grid, layout ids (family, seed) with disjoint training and evaluation
seeds, and ROS map_server occupancy grids merged into wall slots.
"""

from __future__ import annotations

from navexp.task.maps.families import FAMILIES, MapSpec, generate, wall_slots_needed
from navexp.task.maps.regenerate import generate_layouts

__all__ = ["FAMILIES", "MapSpec", "generate", "generate_layouts", "wall_slots_needed"]
