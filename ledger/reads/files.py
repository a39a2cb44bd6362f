"""Choosing, from the log alone, which files a view may read without cancelling entries.

A file whose keys are unique, which holds no delete mark, and whose key range meets no other
file's holds the only entry of each of its keys: its rows are visible as they are. After a full
merge every file is like that, so the visible view costs a plain scan. A file whose keys are
unique and which holds no delete mark but whose key range meets another file's is *lonely*: a
key of it has other entries only in the files its range meets, so only keys shared with those
files need cancelling (:func:`file_roles`). Files of insertions only (no delete mark) add to
totals without weighting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ledger.log.entries import FileMarker
from ledger.pruning import _decoder

Box = list[tuple[Any, Any]]  # per key column: (low, high)


def insertions_only(marker: FileMarker) -> bool:
    return marker.dml_sum == marker.rows


@dataclass(frozen=True)
class FileRoles:
    """The files of a snapshot by what the visible view must do with their rows."""

    isolated: list[FileMarker]  # visible as they are
    lonely: list[FileMarker]  # unique keys, no mark, key range meeting another file's
    others: list[FileMarker]  # holding delete marks or repeated keys
    # Whether two lonely files' key ranges meet (a key may then occur in both).
    lonely_overlap: bool


def split_isolated(
    markers: Sequence[FileMarker], key_types: Sequence[pa.DataType]
) -> tuple[list[FileMarker], list[FileMarker]]:
    """(isolated files, the others): see the module docstring."""
    roles = file_roles(markers, key_types)
    others = {id(m) for m in (*roles.lonely, *roles.others)}
    return roles.isolated, [m for m in markers if id(m) in others]


def file_roles(markers: Sequence[FileMarker], key_types: Sequence[pa.DataType]) -> FileRoles:
    """Each file's role (see the module docstring).

    Boxes of per-column key bounds are compared: two files whose boxes are disjoint in any
    column share no key. Columns whose bounds do not order like their values (see
    ledger.pruning) make every file count as overlapping.
    """
    clean = [m.unique_keys and insertions_only(m) for m in markers]
    decoders = [_decoder(t) for t in key_types]
    overlap: tuple[set[int], bool] | None = None
    if all(d is not None for d in decoders):
        try:
            overlap = _overlaps(markers, decoders, clean)  # type: ignore[arg-type]
        except TypeError:  # bounds of different types (a widened key column): compare nothing
            overlap = None
    if overlap is None:  # every two files may share keys
        overlap = (set(range(len(markers))) if len(markers) > 1 else set(), sum(clean) > 1)
    overlapping, lonely_overlap = overlap
    return FileRoles(
        isolated=[m for i, m in enumerate(markers) if clean[i] and i not in overlapping],
        lonely=[m for i, m in enumerate(markers) if clean[i] and i in overlapping],
        others=[m for i, m in enumerate(markers) if not clean[i]],
        lonely_overlap=lonely_overlap,
    )


def _overlaps(
    markers: Sequence[FileMarker], decoders: list[Callable[[Any], Any]], clean: list[bool]
) -> tuple[set[int], bool]:
    """(the files whose key box meets another file's, whether two ``clean`` files' boxes
    meet); a file without bounds meets every other file."""
    boxes: list[Box | None] = [_box(m, decoders) for m in markers]
    unbounded = [i for i, b in enumerate(boxes) if b is None]
    overlapping: set[int] = set()
    clean_meet = False
    if unbounded and len(markers) > 1:
        overlapping = set(range(len(markers)))
        clean_meet = any(clean[i] for i in unbounded) and sum(clean) > 1
    # Sweep along the first key column: only files whose first-column ranges meet can overlap.
    order = sorted(
        (i for i, b in enumerate(boxes) if b is not None),
        key=lambda i: boxes[i][0][0],  # type: ignore[index]
    )
    active: list[int] = []
    for i in order:
        box = boxes[i]
        assert box is not None
        active = [j for j in active if boxes[j][0][1] >= box[0][0]]  # type: ignore[index]
        for j in active:
            if _meet(box, boxes[j]):  # type: ignore[arg-type]
                overlapping.update((i, j))
                clean_meet = clean_meet or (clean[i] and clean[j])
        active.append(i)
    return overlapping, clean_meet


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


def split_by_age(
    lonely: Sequence[FileMarker], others: Sequence[FileMarker]
) -> tuple[list[FileMarker], list[FileMarker]]:
    """(the ``lonely`` files whose entries are all older than every entry of ``others``, the
    rest of ``lonely``), by the markers' transaction ranges: a key's latest insertion is then
    never in the older ones when ``others`` hold one (the visible view settles most keys by
    it, see :func:`ledger.sql.visible._live_rows_after_lonely`)."""
    if not others:
        return list(lonely), []
    first_other = min(m.trx_min for m in others)
    older = [m for m in lonely if m.trx_max < first_other]
    return older, [m for m in lonely if m.trx_max >= first_other]
