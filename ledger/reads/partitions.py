"""What a partition-restricted read opens, and whether its rows must then be filtered.

A key's visible row is decided by every entry of the key, wherever it lives. When the table is
partitioned by a function of its key columns, every entry of a key is in one partition and the
chosen partitions' files are exactly what a read restricted to them needs. Otherwise a key
written again into another partition (a blind insert or an upsert of a replacing table keyed
by ``id`` and partitioned by ``region``) moves its row there: its older entries in the chosen
partition no longer show. A restricted read then also opens every file that may hold a key of
a chosen file (its key range, from the log, meets a chosen file's: conservative), finds the
visible rows of all of them, and keeps the rows whose own partition values are chosen: the
unrestricted answer filtered to the chosen partitions.

Sign-weighted totals of collapsing, dedup and custom tables sum entries, each of which lives in
its own row's partition (a delete mark carries the values it cancels, partition columns
included), so their totals and counts stay exact over the chosen files alone, unless a dedup
key may make entries of different partitions repeats of each other.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ledger.log.entries import FileMarker
from ledger.log.state import TableState
from ledger.partitioning import PartitionSpec
from ledger.pruning import _decoder, prune_by_partitions
from ledger.schema import TRX_ID, TRX_SEQ
from ledger.sql.spec import TableSpec
from ledger.writer import file_schema
from merge_policies.base import AGGREGATED, SIGNED

Filters = list[dict[str, set[str | None]]]


@dataclass(frozen=True)
class PartitionRead:
    """The files a read restricted to some partitions opens. ``filters`` is None when every
    row those files give belongs to the chosen partitions (the read is exact as it is);
    otherwise the rows must be kept by :meth:`keep`."""

    markers: list[FileMarker]
    spec: PartitionSpec | None = None  # None for a read of every partition
    filters: Filters | None = None

    @property
    def exact(self) -> bool:
        return self.filters is None

    @property
    def sources(self) -> list[str]:
        """The columns the partition values are computed from."""
        fields = self.spec.fields if self.spec is not None else []
        return list(dict.fromkeys(f.source for f in fields))

    def keep(self, rows: pa.Table) -> pa.Table:
        """The ``rows`` (holding every column of :attr:`sources`) of the chosen partitions,
        their values computed as the writer computes them."""
        if self.filters is None or self.spec is None:
            return rows
        values = {f.name: f.values(rows) for f in self.spec.fields}
        chosen = pa.array([False] * rows.num_rows, pa.bool_())
        for flt in self.filters:
            matched = pa.array([True] * rows.num_rows, pa.bool_())
            for name, wanted in flt.items():
                texts = [w for w in wanted if w is not None]
                member = pc.is_in(values[name], value_set=pa.array(texts, pa.string()))
                if None in wanted:  # the NULL partition
                    member = pc.or_(member, pc.is_null(values[name]))
                matched = pc.and_(matched, member)
            chosen = pc.or_(chosen, matched)
        return rows.filter(chosen)


def partition_read(
    state: TableState,
    alive: Sequence[FileMarker],
    partitions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    *,
    entries: bool = False,
) -> PartitionRead:
    """The files of ``alive`` a read of the ``partitions`` of a table at ``state`` opens.

    ``entries`` says the read sums entries rather than finding visible rows (the totals and
    counts of tables whose visible rows are signed)."""
    spec = PartitionSpec.parse(list(state.config.partition_by), state.schema)
    filters = spec.normalise_filter(partitions)
    chosen = prune_by_partitions(alive, filters)
    if pruning_exact(state, entries=entries):
        return PartitionRead(chosen, spec)
    table = TableSpec.of(state)
    picked = {id(m) for m in chosen}
    rest = [m for m in alive if id(m) not in picked]
    if table.policy.visible_rows == AGGREGATED or not table.policy.keys_independent:
        # A group's row is merged from all its entries (its partition value with them), or
        # repeats cross keys: only every file answers.
        sharing = rest
    else:
        schema = file_schema(state.schema, state.config)
        sharing = _sharing_keys(chosen, rest, schema.field(table.key_columns[0]).type)
    shared = {id(m) for m in sharing}
    return PartitionRead([m for m in alive if id(m) in picked or id(m) in shared], spec, filters)


def pruning_exact(state: TableState, *, entries: bool = False) -> bool:
    """Whether the rows (or, with ``entries``, the entries summed) a read finds over the chosen
    partitions' files alone are exactly those of the chosen partitions, whichever they are."""
    config = state.config
    spec = PartitionSpec.parse(list(config.partition_by), state.schema)
    if not spec.fields:
        return True
    policy = TableSpec.of(state).policy
    repeat = policy.repeat_columns(config.key_columns)
    # Repeats are one entry written twice (same transaction and place in it), or agree on the
    # columns the partition is computed from: either way they share a partition.
    repeats_local = (
        repeat is None
        or {TRX_ID, TRX_SEQ} <= set(repeat)
        or {f.source for f in spec.fields} <= set(repeat)
    )
    if entries and policy.visible_rows == SIGNED:
        return repeats_local
    return config.partition_by_key_only and repeats_local


def _sharing_keys(
    chosen: Sequence[FileMarker], rest: Sequence[FileMarker], key_type: pa.DataType
) -> list[FileMarker]:
    """The files of ``rest`` whose first key column's range meets a ``chosen`` file's (every
    one, where the ranges are unknown or do not order like the values)."""
    decode = _decoder(key_type)
    if decode is None:
        return list(rest)
    try:
        ranges = sorted(_first_range(m, decode) for m in chosen)
    except (TypeError, ValueError):
        return list(rest)
    merged: list[list[Any]] = []
    for low, high in ranges:
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    lows = [low for low, _ in merged]
    sharing = []
    for marker in rest:
        try:
            low, high = _first_range(marker, decode)
            # The last chosen range starting at or before this file's end.
            at = bisect.bisect_right(lows, high) - 1
            meets = at >= 0 and merged[at][1] >= low
        except (TypeError, ValueError):
            meets = True
        if meets:
            sharing.append(marker)
    return sharing


def _first_range(marker: FileMarker, decode: Any) -> tuple[Any, Any]:
    """The file's range of its first key column; TypeError where the log does not know it."""
    if marker.key_min is None or marker.key_max is None:
        raise TypeError("no key range")
    low, high = marker.key_min[0], marker.key_max[0]
    if low is None or high is None:
        raise TypeError("no key range")
    return decode(low), decode(high)
