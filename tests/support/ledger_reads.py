"""Reading a table's meaning for assertions: live entries, visible rows, sign sums per key.

The reference shares no code with the library's reads: the data files the log names are read
with pyarrow, and the definitions of docs/concepts.md section 1 (live entries, the visible row)
and of each policy's views (docs/merges.md, docs/views.md) are applied in plain Python. A bug in
the library's live-entry SQL, which the write path also uses to choose what an update cancels,
therefore shows up as a difference instead of being repeated by the reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ledger import Table

ROW_ID = "_row_id"
TRX_ID = "trx_id"
TRX_SEQ = "trx_seq"
DML_TYPE = "dml_type"

Entry = dict[str, Any]


# --- the raw entries ----------------------------------------------------------------------------


def raw_entries(table: Table, version: int | None = None) -> list[Entry]:
    """Every entry of the files the log names at ``version``, as plain dicts (files written
    before a column was added lack it: its value is None)."""
    snapshot = table.snapshot(version)
    store = snapshot.store
    entries: list[Entry] = []
    for marker in snapshot.markers():
        path = store.fs_path(snapshot.prefix + marker.path)
        entries.extend(pq.read_table(path, filesystem=store.filesystem).to_pylist())
    return entries


def _value_columns(table: Table) -> list[str]:
    extra = [ROW_ID] if table.config["generated_row_id"] else []
    return [*table.schema, *extra]


def _key_columns(table: Table) -> list[str]:
    return list(table.primary_key) or [ROW_ID]


class _NaN:
    """Stands for every NaN in a grouping key: NaN equals NaN when entries are compared."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return 0


_NAN = _NaN()


def _same_value(value: Any) -> Any:
    """A value as entries are compared: NULL equals NULL, NaN equals NaN, -0.0 equals 0.0 and a
    DECIMAL by its value (Python's own == and hash do the last three but NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return _NAN
    if isinstance(value, list):
        return tuple(_same_value(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _same_value(v)) for k, v in value.items())
    return value


def _grouping(entry: Entry, columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(_same_value(entry.get(c)) for c in columns)


# --- live entries and visible rows (docs/concepts.md section 1) ---------------------------------


class _Live:
    """One distinct value tuple of a key: its sign sum and its latest insertion."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self.net = 0
        self.latest: tuple[int, int] | None = None

    def add(self, entry: Entry) -> None:
        self.net += entry[DML_TYPE]
        if entry[DML_TYPE] == 1:
            order = (entry[TRX_ID], entry[TRX_SEQ])
            self.latest = order if self.latest is None else max(self.latest, order)


def live_entries(entries: Iterable[Entry], values: Sequence[str]) -> list[_Live]:
    """The distinct value tuples whose signs sum above zero."""
    groups: dict[tuple[Any, ...], _Live] = {}
    for entry in entries:
        group = _grouping(entry, values)
        if group not in groups:
            groups[group] = _Live(tuple(entry.get(c) for c in values))
        groups[group].add(entry)
    return [g for g in groups.values() if g.net > 0]


def visible_of(entries: Iterable[Entry], key: Sequence[str], values: Sequence[str]) -> list[Any]:
    """The live entry of each key whose latest insertion is latest."""
    positions = [values.index(k) for k in key]
    best: dict[tuple[Any, ...], _Live] = {}
    for live in live_entries(entries, values):
        group = tuple(_same_value(live.values[p]) for p in positions)
        current = best.get(group)
        if current is None or (live.latest or (-1, -1)) > (current.latest or (-1, -1)):
            best[group] = live
    return sorted((live.values for live in best.values()), key=repr)


def visible_rows(table: Table, version: int | None = None) -> list[tuple[Any, ...]]:
    """The latest live row of every key, sorted, as tuples in schema order."""
    values = _value_columns(table)
    return visible_of(raw_entries(table, version), _key_columns(table), values)


def sign_sums(table: Table, version: int | None = None) -> dict[tuple[Any, ...], int]:
    """sum(dml_type) per key, keys with a zero sum left out."""
    return sign_sums_of(raw_entries(table, version), _key_columns(table))


def sign_sums_of(entries: Iterable[Entry], key: Sequence[str]) -> dict[tuple[Any, ...], int]:
    """sum(dml_type) per key of ``entries``, keys with a zero sum left out."""
    sums: dict[tuple[Any, ...], int] = {}
    for entry in entries:
        group = tuple(entry.get(c) for c in key)
        sums[group] = sums.get(group, 0) + entry[DML_TYPE]
    return {k: s for k, s in sums.items() if s != 0}


def entry_count(table: Table, version: int | None = None) -> int:
    """Number of raw entries (rows in data files) at a version."""
    return len(raw_entries(table, version))


# --- what each policy's generated views answer (docs/merges.md, docs/views.md) -----------------


def policy_answer(table: Table, version: int | None = None) -> Any:
    """Everything a view of the table answers, in a comparable form, by the table's policy.

    collapsing and custom: visible rows; replacing: the latest entry per key unless a mark;
    dedup: visible rows after dropping repeats; aggregating: the rollup per group key.
    Plus, for every policy but aggregating, sign-weighted totals over every column (over the
    visible rows for replacing tables).
    """
    policy = dict(table.config["policy"])
    name = policy["name"]
    entries = raw_entries(table, version)
    key = _key_columns(table)
    values = _value_columns(table)
    numeric = _numeric_columns(table, values)
    if name == "aggregating":
        return _rollup(entries, key, policy["measures"])
    if name == "replacing":
        # Replacing merges drop superseded entries and their marks, so a replacing table's
        # totals are over its visible rows, not its signs.
        latest = _latest_entries(entries, key, policy.get("version_column"))
        kept = [e for e in latest if e[DML_TYPE] == 1]
        visible = sorted((tuple(e.get(c) for c in values) for e in kept), key=repr)
        return {"visible": visible, "totals": _totals(kept, values, numeric)}
    if name == "dedup":
        columns = list(policy.get("dedup_key") or [*key, TRX_ID, TRX_SEQ])
        if DML_TYPE not in columns:
            columns.append(DML_TYPE)
        entries = _first_of_each(entries, columns)
    visible = visible_of(entries, key, values)
    return {"visible": visible, "totals": _totals(entries, values, numeric)}


def _numeric_columns(table: Table, values: Sequence[str]) -> set[str]:
    """Columns a weighted sum applies to (numbers; not booleans, text or times)."""
    schema = table.arrow_schema
    numeric = {ROW_ID} if ROW_ID in values else set()
    for field in schema:
        kind = field.type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
            numeric.add(field.name)
    return numeric


def _by_order(entry: Entry) -> tuple[int, int]:
    return (entry[TRX_ID], entry[TRX_SEQ])


def _first_of_each(entries: list[Entry], columns: Sequence[str]) -> list[Entry]:
    """The oldest entry of each distinct value of ``columns`` (a dedup table drops repeats)."""
    first: dict[tuple[Any, ...], Entry] = {}
    for entry in sorted(entries, key=_by_order):
        first.setdefault(_grouping(entry, columns), entry)
    return list(first.values())


def _latest_entries(
    entries: list[Entry], key: Sequence[str], version_column: str | None
) -> list[Entry]:
    """Each key's latest entry: by ``version_column`` (NULL oldest) if set, then by
    ``(trx_id, trx_seq)``."""

    def order(entry: Entry) -> tuple[Any, ...]:
        version = None if version_column is None else entry.get(version_column)
        return (version is not None, version if version is not None else 0, *_by_order(entry))

    latest: dict[tuple[Any, ...], Entry] = {}
    for entry in entries:
        group = _grouping(entry, key)
        if group not in latest or order(entry) > order(latest[group]):
            latest[group] = entry
    return list(latest.values())


def _weighted_sum(terms: list[tuple[int, Any]]) -> Any:
    """sum(dml_type * x) over the non-NULL x: exact for integers and DECIMAL, correctly rounded
    for floats."""
    if any(isinstance(x, float) for _, x in terms):
        return math.fsum(sign * x for sign, x in terms)
    return sum((sign * x for sign, x in terms), Decimal(0) if _any_decimal(terms) else 0)


def _any_decimal(terms: list[tuple[int, Any]]) -> bool:
    return any(isinstance(x, Decimal) for _, x in terms)


def _totals(entries: list[Entry], values: Sequence[str], numeric: set[str]) -> dict[str, Any]:
    """COUNT, and per column SUM and AVG, each entry weighted by its dml_type, as they would be
    over the visible rows: COUNT of nothing is 0, and SUM and AVG are NULL when no non-NULL
    value is visible. A non-numeric column gives its weighted count of non-NULL values only."""
    out: dict[str, Any] = {"count": sum(e[DML_TYPE] for e in entries)}
    for column in values:
        terms = [(e[DML_TYPE], e.get(column)) for e in entries if e.get(column) is not None]
        present = sum(sign for sign, _ in terms)
        if column not in numeric:
            out[column] = (present,)
            continue
        if present == 0:
            out[column] = (None, None)
            continue
        total = _weighted_sum(terms)
        out[column] = (total, float(total) / present)
    return out


_ROLLUP_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {"min": min, "max": max}


def _rollup(entries: list[Entry], key: list[str], measures: dict[str, str]) -> list[Any]:
    """One row per group key: sum and count measures weighted by dml_type (0 when nothing),
    other measures over every entry; a group whose first count measure nets to zero is gone."""
    groups: dict[tuple[Any, ...], list[Entry]] = {}
    for entry in entries:
        groups.setdefault(_grouping(entry, key), []).append(entry)
    counts = [c for c, f in measures.items() if f == "count"]
    rows = []
    for members in groups.values():
        row = [members[0].get(k) for k in key]
        for column, function in measures.items():
            present = [(e[DML_TYPE], e[column]) for e in members if e.get(column) is not None]
            if function in ("sum", "count"):
                row.append(_weighted_sum(present) if present else 0)
            else:
                seen = [x for _, x in present]
                row.append(_ROLLUP_FUNCTIONS[function](seen) if seen else None)
        if counts:
            count_position = len(key) + list(measures).index(counts[0])
            if row[count_position] == 0:
                continue
        rows.append(tuple(row))
    return sorted(rows, key=repr)
