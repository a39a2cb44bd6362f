"""Choosing, from the log alone, which files a view may read without cancelling entries.

A file whose keys are unique, which holds no delete mark, and whose key range meets no other
file's holds the only entry of each of its keys: its rows are visible as they are. After a full
merge every file is like that, so the visible view costs a plain scan. Files of insertions only
(no delete mark) add to totals without weighting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ledger.log.entries import FileMarker
from ledger.pruning import _decoder

Box = list[tuple[Any, Any]]  # per key column: (low, high)


def insertions_only(marker: FileMarker) -> bool:
    return marker.dml_sum == marker.rows


def split_isolated(
    markers: Sequence[FileMarker], key_types: Sequence[pa.DataType]
) -> tuple[list[FileMarker], list[FileMarker]]:
    """(isolated files, the others): see the module docstring.

    Boxes of per-column key bounds are compared: two files whose boxes are disjoint in any
    column share no key. Columns whose bounds do not order like their values (see
    ledger.pruning) make every file count as overlapping.
    """
    decoders = [_decoder(t) for t in key_types]
    if not markers or any(d is None for d in decoders):
        return [], list(markers)
    try:
        return _split(markers, decoders)  # type: ignore[arg-type]
    except TypeError:  # bounds of different types (a widened key column): compare nothing
        return [], list(markers)


def _split(
    markers: Sequence[FileMarker], decoders: list[Callable[[Any], Any]]
) -> tuple[list[FileMarker], list[FileMarker]]:
    boxes: list[Box | None] = [_box(m, decoders) for m in markers]
    # Sweep along the first key column: only files whose first-column ranges meet can overlap.
    order = sorted(
        (i for i, b in enumerate(boxes) if b is not None),
        key=lambda i: boxes[i][0][0],  # type: ignore[index]
    )
    overlapping = {i for i, b in enumerate(boxes) if b is None}
    active: list[int] = []
    for i in order:
        box = boxes[i]
        assert box is not None
        active = [j for j in active if boxes[j][0][1] >= box[0][0]]  # type: ignore[index]
        for j in active:
            if _meet(box, boxes[j]):  # type: ignore[arg-type]
                overlapping.update((i, j))
        active.append(i)
    isolated: list[FileMarker] = []
    others: list[FileMarker] = []
    for i, marker in enumerate(markers):
        clean = marker.unique_keys and insertions_only(marker) and i not in overlapping
        (isolated if clean else others).append(marker)
    return isolated, others


def _box(marker: FileMarker, decoders: list[Callable[[Any], Any]]) -> Box | None:
    if marker.key_min is None or marker.key_max is None:
        return None
    try:
        box = [
            (decode(low), decode(high))
            for decode, low, high in zip(decoders, marker.key_min, marker.key_max, strict=True)
        ]
    except (TypeError, ValueError):
        return None
    if any(low is None or high is None for low, high in box):
        return None
    return box


def _meet(a: Box, b: Box) -> bool:
    return all(
        a_low <= b_high and b_low <= a_high
        for (a_low, a_high), (b_low, b_high) in zip(a, b, strict=True)
    )
