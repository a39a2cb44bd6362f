"""An oracle for the generated views: a plain table updated in place, and ways to compare answers.

The oracle never touches a ledger. It holds, per key, the rows a plain table would hold (a blind
insert of a key that exists adds a second row, as a ledger's live entries do), and answers
visible rows and GROUP BY totals with ordinary SQL over those rows on DuckDB.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from ledger.engines.duckdb.session import connect
from ledger.sql import ident, idents

Row = dict[str, Any]


class InPlaceTable:
    """key -> the rows of that key, oldest first; the last one is the key's visible row."""

    def __init__(self, schema: pa.Schema, key: Sequence[str]) -> None:
        self.schema = schema
        self.columns = list(schema.names)
        self.key = list(key)
        self.rows: dict[tuple[Any, ...], list[Row]] = {}

    def _key_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[k] for k in self.key)

    def copy(self) -> InPlaceTable:
        return copy.deepcopy(self)

    # --- writes ---------------------------------------------------------------------------------

    def insert(self, rows: Sequence[Row]) -> None:
        """Blind appends: a key that exists gets one more row."""
        for row in rows:
            full = {c: row.get(c) for c in self.columns}
            self.rows.setdefault(self._key_of(full), []).append(full)

    def replace(self, rows: Sequence[Row]) -> None:
        """upsert/update: every row of the key goes, one row comes; missing columns keep the
        visible row's values (NULL for a new key)."""
        for row in rows:
            key = self._key_of(row)
            merged = {c: None for c in self.columns}
            if key in self.rows:
                merged.update(self.rows[key][-1])
            merged.update(row)
            self.rows[key] = [merged]

    def exists(self, key: tuple[Any, ...]) -> bool:
        return key in self.rows

    def delete(self, keys: Sequence[tuple[Any, ...]]) -> None:
        for key in keys:
            self.rows.pop(key, None)

    def delete_where(self, matches: Callable[[Row], bool]) -> None:
        for key in list(self.rows):
            kept = [r for r in self.rows[key] if not matches(r)]
            if kept:
                self.rows[key] = kept
            else:
                del self.rows[key]

    # --- reads ----------------------------------------------------------------------------------

    def visible(self) -> list[tuple[Any, ...]]:
        return sorted(
            (tuple(rows[-1][c] for c in self.columns) for rows in self.rows.values()), key=repr
        )

    def live_rows(self) -> list[Row]:
        return [row for rows in self.rows.values() for row in rows]

    def totals(
        self,
        by: Sequence[str] = (),
        sums: Sequence[str] = (),
        avgs: Sequence[str] = (),
        count: bool = True,
        where: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """Plain COUNT(*)/SUM/AVG ... GROUP BY over the rows, as SQL computes them."""
        return plain_totals(
            pa.Table.from_pylist(self.live_rows(), schema=self.schema), by, sums, avgs, count, where
        )


def plain_totals(
    rows: pa.Table,
    by: Sequence[str] = (),
    sums: Sequence[str] = (),
    avgs: Sequence[str] = (),
    count: bool = True,
    where: str | None = None,
) -> list[tuple[Any, ...]]:
    """COUNT(*)/SUM/AVG per group of ``by`` over ``rows`` (one row when ``by`` is empty)."""
    selected = [ident(c) for c in by]
    if count:
        selected.append("CAST(count(*) AS BIGINT)")
    selected += [f"sum({ident(c)})" for c in sums]
    selected += [f"avg({ident(c)})" for c in avgs]
    sql = f"SELECT {', '.join(selected)} FROM oracle_rows"
    if where is not None:
        sql += f" WHERE {where}"
    if by:
        sql += f" GROUP BY {idents(list(by))}"
    con = connect()
    try:
        con.register("oracle_rows", rows)
        return con.sql(sql).fetchall()
    finally:
        con.close()


# --- comparing answers ----------------------------------------------------------------------------


def _same_value(got: Any, want: Any) -> bool:
    if isinstance(got, float) or isinstance(want, float):
        if got is None or want is None:
            return got is None and want is None
        if math.isnan(float(got)) or math.isnan(float(want)):
            return math.isnan(float(got)) and math.isnan(float(want))
        return bool(float(got) == pytest.approx(float(want), rel=1e-9, abs=1e-6))
    if isinstance(got, Decimal) or isinstance(want, Decimal):
        return got is not None and want is not None and Decimal(got) == Decimal(want)
    return bool(got == want)


def same_rows(got: Sequence[tuple[Any, ...]], want: Sequence[tuple[Any, ...]], groups: int) -> bool:
    """Equal multisets of rows, matched by their first ``groups`` values (the GROUP BY
    columns); floats up to rounding (DOUBLE sums depend on the order of summation)."""
    if len(got) != len(want):
        return False

    def order(row: tuple[Any, ...]) -> str:
        return repr(row[:groups]) if groups else repr(tuple(v for v in row if not _floaty(v)))

    for a, b in zip(sorted(got, key=order), sorted(want, key=order), strict=True):
        if len(a) != len(b) or not all(_same_value(x, y) for x, y in zip(a, b, strict=True)):
            return False
    return True


def _floaty(value: Any) -> bool:
    return isinstance(value, float)


def assert_same_rows(
    got: Sequence[tuple[Any, ...]], want: Sequence[tuple[Any, ...]], groups: int, what: str = ""
) -> None:
    assert same_rows(got, want, groups), (
        f"{what}\n got: {sorted(got, key=repr)}\nwant: {sorted(want, key=repr)}"
    )
