"""Aggregating (rollup tables): one entry per group key, its measures merged.

The table's primary key is the group key; every other column is a measure with a merge function:
``sum`` and ``count`` (which merge by summing, each entry weighted by its ``dml_type``, so a
delete mark subtracts what its insertion added; ``avg`` is a sum measure divided by a count
measure), or ``min``/``max``. Min and max cannot be undone by a delete mark, so they are only
allowed on ``insert_only`` tables, which refuse delete marks.

The merged entry of a group is an insertion carrying the group's totals (and the latest
``trx_id``/``trx_seq`` of the group). A group whose count measure and sum measures all net to
zero (or NULL) among the merged entries holds no rows and adds nothing, and is dropped; without a
count measure no group is ever dropped, so totals that reach zero do not make a group vanish.
Rollup totals read a sum over no non-NULL values as 0, so dropping such a group changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ledger.errors import InvalidArgumentError
from ledger.log.entries import TableConfig
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ, TableSchema, arrow_to_sql
from ledger.sql import ident, idents
from ledger.sql.names import ORDER_SHIFT
from merge_policies.base import AGGREGATED, ENTRY_ORDER, MergeContext, PolicyDefaults, check_options

NAME = "aggregating"
FUNCTIONS = ("sum", "count", "min", "max")
UNDOABLE = ("sum", "count")
_EXAMPLE = '{"name": "aggregating", "measures": {"amount": "sum", "events": "count"}}'


@dataclass(frozen=True)
class AggregatingPolicy(PolicyDefaults):
    measures: tuple[tuple[str, str, str], ...]  # (column, function, SQL type)
    insert_only: bool
    floating: frozenset[str] = frozenset()  # the measures of a floating-point type
    name: str = NAME

    @property
    def visible_rows(self) -> str:
        return AGGREGATED

    @property
    def files_isolatable(self) -> bool:
        return False

    def aggregates(self) -> tuple[tuple[str, str, str], ...]:
        return self.measures

    def _signed_sum(self, column: str) -> str:
        """``sum(dml_type * column)``; for a floating-point column, added in entry order:
        floating-point addition is not associative, and a sum in the order the engine's threads
        read the files would differ in its last bits from one merge of the same files to the
        next (and a group netting to almost zero would be kept by one and dropped by another)."""
        dml, col = ident(DML_TYPE), ident(column)
        if column not in self.floating:
            return f"sum({dml} * {col})"
        # Entries of one group share no (trx_id, trx_seq) unless repeated; the sign and value
        # order ties so that even then the sum is the same.
        return f"sum({dml} * {col} ORDER BY {ENTRY_ORDER}, {dml}, {col})"

    def merge_sql(self, context: MergeContext) -> str:
        keys = idents(list(context.key_columns))
        dml = ident(DML_TYPE)
        selected = [keys]
        for column, function, sql_type in self.measures:
            col = ident(column)
            if function in UNDOABLE:
                selected.append(f"CAST({self._signed_sum(column)} AS {sql_type}) AS {col}")
            else:
                selected.append(f"{function}({col}) AS {col}")
        selected += [
            f"CAST(1 AS TINYINT) AS {dml}",
            f"CAST(max({ENTRY_ORDER}) // {ORDER_SHIFT} AS BIGINT) AS {ident(TRX_ID)}",
            f"CAST(max({ENTRY_ORDER}) % {ORDER_SHIFT} AS INTEGER) AS {ident(TRX_SEQ)}",
        ]
        counts = [c for c, f, _ in self.measures if f == "count"]
        having = ""
        if counts and not self.insert_only:
            # A group is dropped only when it holds no rows and every total it adds is zero: a
            # merge of some files may see a correction (same count, other values) whose count
            # nets to zero while its sums do not.
            undoable = [c for c, f, _ in self.measures if f in UNDOABLE]
            having = (
                " HAVING NOT ("
                + " AND ".join(f"coalesce({self._signed_sum(c)}, 0) = 0" for c in undoable)
                + ")"
            )
        return f"SELECT {', '.join(selected)} FROM {context.source} GROUP BY {keys}{having}"


def policy_spec(measures: Mapping[str, str]) -> dict[str, Any]:
    """The stored spec of an aggregating policy summing or counting each of ``measures``
    (column -> ``"sum"`` or ``"count"``), e.g. for a rollup table."""
    return {"name": NAME, "measures": dict(measures)}


def build(
    options: Mapping[str, Any], schema: TableSchema, config: TableConfig
) -> AggregatingPolicy:
    check_options(NAME, options, ("measures", "insert_only"), _EXAMPLE)
    if config.generated_row_id:
        raise InvalidArgumentError(
            "the aggregating policy merges entries per group key: give the table a primary key "
            "(the group-by columns)"
        )
    measures = options.get("measures")
    if not isinstance(measures, Mapping) or not measures:
        raise InvalidArgumentError(f"merge policy 'aggregating' needs measures, e.g. {_EXAMPLE}")
    insert_only = options.get("insert_only", False)
    if not isinstance(insert_only, bool):
        raise InvalidArgumentError("merge policy 'aggregating': insert_only must be true or false")
    others = [c for c in schema.names if c not in config.primary_key]
    unknown = [c for c in measures if c not in others]
    if unknown:
        raise InvalidArgumentError(
            f"merge policy 'aggregating': measures {unknown} are not non-key columns of the "
            f"table (non-key columns: {others})"
        )
    missing = [c for c in others if c not in measures]
    if missing:
        raise InvalidArgumentError(
            f"merge policy 'aggregating': columns {missing} have no merge function; every "
            f"non-key column is a measure ({list(FUNCTIONS)})"
        )
    out = []
    floating = set()
    for column in others:
        function = measures[column]
        if function not in FUNCTIONS:
            raise InvalidArgumentError(
                f"merge policy 'aggregating': measure {column!r} has merge function "
                f"{function!r}; choose one of {list(FUNCTIONS)} (avg is a sum measure divided "
                "by a count measure)"
            )
        data_type = schema.type_of(column)
        if function == "count" and not pa.types.is_integer(data_type):
            raise InvalidArgumentError(
                f"merge policy 'aggregating': count measure {column!r} must be an integer column"
            )
        if function in UNDOABLE and not (
            pa.types.is_integer(data_type)
            or pa.types.is_decimal(data_type)
            or pa.types.is_floating(data_type)
        ):
            raise InvalidArgumentError(
                f"merge policy 'aggregating': {function} measure {column!r} must be numeric"
            )
        if function not in UNDOABLE and not insert_only:
            raise InvalidArgumentError(
                f"merge policy 'aggregating': measure {column!r} uses {function}, which a delete "
                "mark cannot undo; use it only on a table that never receives delete marks and "
                'say so with "insert_only": true (the table then refuses updates and deletes)'
            )
        out.append((column, function, arrow_to_sql(data_type)))
        if pa.types.is_floating(data_type):
            floating.add(column)
    return AggregatingPolicy(tuple(out), insert_only, frozenset(floating))
