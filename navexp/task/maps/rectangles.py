"""Occupancy grids merged into axis-aligned rectangles that fit the wall slots, batched in torch.

Runs of occupied cells along each row become segments; a segment continues the rectangle above it
when the row above has a segment with exactly the same columns. So a rectangle is a maximal stack of
identical row segments (greedy, not the fewest rectangles, but exact: the union of the rectangles is
the occupied cells). Row loops are over grid rows, never over layouts.
"""

from __future__ import annotations

import torch


def merge_rectangles(
    occ: torch.Tensor, origin_xy: tuple[float, float], cell_yx: tuple[float, float], max_rects: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rectangles covering the occupied cells of ``occ`` [K, NY, NX] (row 0 at ``origin_xy[1]``,
    column 0 at ``origin_xy[0]``; cells ``cell_yx`` metres along y and x).

    Returns:
        centre [K, R, 2] and half-extents [K, R, 2] (metres, R = ``max_rects``; unused slots zero),
        active [K, R] bool, and count [K] long: the rectangles the grid needs (more than R means
        it does not fit; its first R rectangles are still returned).
    """
    k, ny, nx = occ.shape
    dev = occ.device
    cols = torch.arange(nx, device=dev)
    left = torch.nn.functional.pad(occ, (1, 0), value=False)[:, :, :nx]
    right = torch.nn.functional.pad(occ, (0, 1), value=False)[:, :, 1:]
    starts = occ & ~left  # [K, NY, NX] a run starts here
    ends = occ & ~right
    # End column of the run through each cell: the nearest run end at or after it.
    end_col = torch.where(ends, cols, nx).flip(-1).cummin(-1).values.flip(-1)
    # A run continues the one above (row y - 1) when that row has a run with the same start and end.
    above_start = torch.nn.functional.pad(starts, (0, 0, 1, 0), value=False)[:, :ny]
    above_end = torch.nn.functional.pad(end_col, (0, 0, 1, 0), value=-1)[:, :ny]
    continues = starts & above_start & (above_end == end_col)
    top = starts & ~continues  # a rectangle's first row (lowest y)
    # Height of the stack from each run start upwards: 1 + the height of the run in the next row when
    # that one continues it (a loop over rows, from the last one down).
    height = torch.zeros(k, ny, nx, dtype=torch.long, device=dev)
    height[:, ny - 1] = starts[:, ny - 1].long()
    for y in range(ny - 2, -1, -1):
        height[:, y] = starts[:, y] * (1 + continues[:, y + 1] * height[:, y + 1])
    count = top.view(k, -1).sum(1)
    # The first max_rects rectangles per grid, in row-major order of their first cell.
    flat_top = top.view(k, -1)
    order = torch.argsort((~flat_top).to(torch.uint8), dim=1, stable=True)[:, :max_rects]
    if order.shape[1] < max_rects:  # fewer cells than slots
        order = torch.nn.functional.pad(order, (0, max_rects - order.shape[1]))
    active = torch.arange(max_rects, device=dev) < count.clamp(max=max_rects).view(-1, 1)
    row, col = order // nx, order % nx
    end = end_col.view(k, -1).gather(1, order)
    h = height.view(k, -1).gather(1, order)
    cy, cx = cell_yx
    x0 = origin_xy[0] + col * cx
    x1 = origin_xy[0] + (end + 1) * cx
    y0 = origin_xy[1] + row * cy
    y1 = origin_xy[1] + (row + h) * cy
    centre = torch.stack(((x0 + x1) / 2, (y0 + y1) / 2), -1).float()
    half = torch.stack(((x1 - x0) / 2, (y1 - y0) / 2), -1).float()
    zero = torch.zeros((), device=dev)
    return (
        torch.where(active[..., None], centre, zero),
        torch.where(active[..., None], half, zero),
        active,
        count,
    )
