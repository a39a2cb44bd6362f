"""The engine axis of the behaviour suites: one adapter per engine, through public APIs only.

A behaviour test takes the ``engine`` fixture (tests/conftest.py) and writes, reads and merges
through it; the same test body then runs on the embedded DuckDB engine (``Table`` verbs,
``views.*``) and on Spark (``ledger.spark.*`` with DataFrames). Answers always come back as
Arrow tables, and :func:`sorted_rows` turns them into sorted tuples of comparable values, so one
expectation holds on both engines.

DuckDB runs every case; Spark runs only the tests marked ``@pytest.mark.engines`` (Spark jobs
cost 0.2-1 s each on two cores: mark the cases that exercise engine code, not every case).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

import ledger
import views
from ledger.rollup import Rollup

ENGINES = ("duckdb", "spark")

Target = ledger.Table | ledger.Transaction
# What the views read: a table, a rollup (read as its own table) or a snapshot.
Readable = ledger.Table | Rollup | ledger.Snapshot


class Engine:
    """What a behaviour test asks of an engine: writes, views and merges."""

    name = ""

    def write(self, target: Target, verb: str, data: Any, **options: Any) -> Any:
        """Run the write ``verb`` (insert, upsert, update, delete, append_entries) of ``data``
        (a list of dicts, an Arrow table or a pandas DataFrame) on a table or transaction."""
        raise NotImplementedError

    def visible(self, table: Readable, **options: Any) -> pa.Table:
        raise NotImplementedError

    def totals(self, table: Readable, **options: Any) -> pa.Table:
        raise NotImplementedError

    def history(self, table: Readable, key: Any, **options: Any) -> pa.Table:
        raise NotImplementedError

    def changes(
        self,
        table: ledger.Table | Rollup,
        since: int,
        until: int | None = None,
        **options: Any,
    ) -> pa.Table:
        raise NotImplementedError

    def merge(self, table: ledger.Table, **options: Any) -> Any:
        """Merge on the engine; ``rows_per_task`` (how Spark cuts a partition into key ranges,
        each its own file) is Spark's alone and left out on DuckDB."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class DuckDBEngine(Engine):
    """The embedded engine: ``Table``/``Transaction`` verbs and ``views.*``."""

    name = "duckdb"

    def write(self, target: Target, verb: str, data: Any, **options: Any) -> Any:
        return getattr(target, verb)(data, **options)

    def visible(self, table: Readable, **options: Any) -> pa.Table:
        return views.visible(table, **options).to_arrow_table()

    def totals(self, table: Readable, **options: Any) -> pa.Table:
        return views.totals(table, **options).to_arrow_table()

    def history(self, table: Readable, key: Any, **options: Any) -> pa.Table:
        return views.history(table, key, **options).to_arrow_table()

    def changes(
        self,
        table: ledger.Table | Rollup,
        since: int,
        until: int | None = None,
        **options: Any,
    ) -> pa.Table:
        return views.changes(table, since, until, **options).to_arrow_table()

    def merge(self, table: ledger.Table, **options: Any) -> Any:
        options.pop("rows_per_task", None)
        return table.merge(**options)


class SparkEngine(Engine):
    """Spark through ``ledger.spark``: every write takes a DataFrame of the same rows."""

    name = "spark"

    def __init__(self, session: Any) -> None:
        self.session = session

    def frame(self, data: Any) -> Any:
        """A DataFrame of ``data``'s rows and Arrow types, built from a Python list (an RDD
        scan over two partitions, as a cluster job reads its input)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        table = as_arrow(data)
        values = [tuple(row.values()) for row in table.to_pylist()]
        return self.session.createDataFrame(values, schema=from_arrow_schema(table.schema))

    def write(self, target: Target, verb: str, data: Any, **options: Any) -> Any:
        import ledger.spark as ls

        return getattr(ls, verb)(target, self.frame(data), **options)

    def visible(self, table: Readable, **options: Any) -> pa.Table:
        import ledger.spark as ls

        return _collected(ls.visible(table, spark=self.session, **options))

    def totals(self, table: Readable, **options: Any) -> pa.Table:
        import ledger.spark as ls

        return _collected(ls.totals(table, spark=self.session, **options))

    def history(self, table: Readable, key: Any, **options: Any) -> pa.Table:
        import ledger.spark as ls

        return _collected(ls.history(table, key, spark=self.session, **options))

    def changes(
        self,
        table: ledger.Table | Rollup,
        since: int,
        until: int | None = None,
        **options: Any,
    ) -> pa.Table:
        import ledger.spark as ls

        return _collected(ls.changes(table, since, until, spark=self.session, **options))

    def merge(self, table: ledger.Table, **options: Any) -> Any:
        import ledger.spark as ls

        return ls.merge(table, spark=self.session, **options)


def _collected(frame: Any) -> pa.Table:
    columns = list(frame.columns)
    records = [dict(zip(columns, row, strict=True)) for row in frame.collect()]
    if not records:
        return pa.table({name: pa.array([], pa.null()) for name in columns})
    return pa.Table.from_pylist(records)


def as_arrow(data: Any) -> pa.Table:
    """``data`` (a list of dicts, an Arrow table or a pandas DataFrame) as an Arrow table."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, list):
        return pa.Table.from_pylist(data)
    return pa.Table.from_pandas(data, preserve_index=False)


def _comparable(value: Any) -> Any:
    # Sums come back as HUGEINT (int) from DuckDB and DECIMAL(38,0) from Spark; averages of
    # doubles may differ in the last bits. Compare every number as a rounded float.
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | Decimal):
        return round(float(value), 9)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        # Spark collects TIMESTAMP WITH TIME ZONE as a naive datetime in the process's zone.
        return value.astimezone().replace(tzinfo=None)
    return value


def sorted_rows(found: pa.Table | Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows (an Arrow table, tuples or pyspark Rows) as sorted tuples of comparable values."""
    if isinstance(found, pa.Table):
        columns = [found.column(i).to_pylist() for i in range(found.num_columns)]
        found = list(zip(*columns, strict=True))
    out = [tuple(_comparable(v) for v in row) for row in found]
    return sorted(out, key=repr)
