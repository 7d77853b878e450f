"""The memory budget rule of src/capture/budget.ts, unchanged: before the capture grows past the
furthest position any layer reached, project the peak of the round that follows (layers in
ascending order; final when it ends at the sealed length, each layer then written and released
as it gets there) and, when it passes the budget, seal at the largest n whose final round fits."""
from typing import List, Optional, Tuple

from .geometry import LayerGeometry, layer_snapshot_values, layer_state_values

HELD_BYTES_PER_VALUE = 4

# (geometry, position, block size) of a live layer, or None once written and released.
LiveLayer = Optional[Tuple[LayerGeometry, int, int]]


def _values_at(live: Tuple[LayerGeometry, int, int], n: int) -> int:
    g, _, bs = live
    return layer_state_values(g, n) + layer_snapshot_values(g, n, bs)


def held_bytes(layers: List[LiveLayer]) -> int:
    return sum(_values_at(l, l[1]) for l in layers if l is not None) * HELD_BYTES_PER_VALUE


def round_peak(layers: List[LiveLayer], n: int, final: bool) -> int:
    running = sum(_values_at(l, l[1]) for l in layers if l is not None)
    peak = running
    for l in layers:
        if l is None:
            continue
        at = _values_at(l, n)
        running += at - _values_at(l, l[1])
        peak = max(peak, running)
        if final:
            running -= at
    return peak * HELD_BYTES_PER_VALUE


def seal_point(layers: List[LiveLayer], frontier: int, to: int, sealed_length: int, budget: int) -> int:
    if round_peak(layers, to, to >= sealed_length) <= budget:
        return to
    for n in range(to - 1, frontier, -1):
        if round_peak(layers, n, True) <= budget:
            return n
    return frontier
