"""What a publish writes, from the ledger alone and for any Delta writer: :func:`publish_plan`.

An engine writing Delta itself (deltalake here, delta-spark's ``DeltaTable.merge`` on Spark)
applies the plan, so that every writer follows the same rules and can continue the others'
publishes.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlglot import exp

from ledger.changes import ChangeSet, change_set
from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.session import work_connection
from ledger.errors import InvalidArgumentError, SnapshotNotFoundError
from ledger.publish.delta_types import delta_schema, published_schema
from ledger.publish.rows import all_rows, changed_keys, repeats_cross_keys, rows_of_keys
from ledger.rollup import Rollup
from ledger.sql.names import ACTION
from ledger.sql.spec import TableSpec
from ledger.table import Table

APP_PREFIX = "ledger:"  # app id of the Delta application transaction: ledger:<table uuid>
DELETE = "delete"
INSERT = "insert"
TARGET_ALIAS = "target"
SOURCE_ALIAS = "source"
# How each Delta writer parses the merge conditions it is given: delta-rs (DataFusion) takes
# standard SQL with "double-quoted" names, Spark `backticks` (sqlglot dialect names).
WRITER_DIALECTS = {"delta-rs": "", "spark": "spark"}


@dataclass(frozen=True)
class PublishResult:
    """What one :func:`publish_delta` did.

    ``version`` is the ledger version the Delta table holds afterwards, ``previous`` the one it
    held before (None: the table was created). ``full`` says the view was written whole (first
    publish, or the changes since ``previous`` could not be read any more), ``skipped`` that the
    Delta table already held the latest version (nothing was written). ``delta_version`` is the
    Delta commit made (None when skipped); ``base_version`` the base table version a published
    rollup matches (its watermark); ``reason`` says why in words.
    """

    version: int
    previous: int | None
    rows_deleted: int
    rows_inserted: int
    full: bool
    skipped: bool
    delta_version: int | None = None
    base_version: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class PublishPlan:
    """What a publish writes, independent of the Delta writer (see :func:`publish_plan`)."""

    app_id: str  # the Delta application transaction id: ledger:<table uuid>
    source_name: str  # the ledger table published (a rollup's own table)
    version: int  # the ledger version the rows are current at
    previous: int | None  # the version the Delta table held (None: none yet)
    full: bool  # write ``rows`` as the whole table; otherwise merge
    reason: str
    schema: pa.Schema  # the published columns (Delta types: :func:`delta_schema`)
    key_columns: tuple[str, ...]
    rows: pa.Table  # full: every row of the view; otherwise the current rows of changed keys
    changed_keys: pa.Table  # the keys whose target rows are replaced (empty when full)
    base_version: int | None = None  # rollups: the base version the totals match
    # Published columns the target lacks (the source's schema evolved since): every writer adds
    # them to the Delta table (nullable, so its rows read NULL there) before writing, as
    # deltalake's schema_mode="merge" would.
    new_columns: tuple[str, ...] = ()

    @property
    def up_to_date(self) -> bool:
        """The Delta table already holds ``version``: nothing to write."""
        return self.previous is not None and self.previous >= self.version

    def merge_source(self) -> pa.Table:
        """One ``delete`` row per changed key (other columns NULL), then the current rows tagged
        ``insert``, in the ``ACTION`` column."""
        tagged = self.schema.append(pa.field(ACTION, pa.string()))
        keys = set(self.key_columns)
        count = self.changed_keys.num_rows
        deletes = pa.table(
            [
                self.changed_keys.column(f.name).cast(f.type)
                if f.name in keys
                else pa.nulls(count, f.type)
                for f in self.schema
            ]
            + [pa.array([DELETE] * count, pa.string())],
            schema=tagged,
        )
        inserts = self.rows.append_column(
            ACTION, pa.array([INSERT] * self.rows.num_rows, pa.string())
        )
        return pa.concat_tables([deletes, inserts.cast(tagged)])

    def merge_condition(
        self, writer: str = "delta-rs", target: str = TARGET_ALIAS, source: str = SOURCE_ALIAS
    ) -> str:
        """``target.k = source.k AND ... AND source.<ACTION> = 'delete'`` for ``writer``
        (``delta-rs`` or ``spark``)."""
        equal: list[exp.Expr] = [
            exp.EQ(this=_column(k, target), expression=_column(k, source)) for k in self.key_columns
        ]
        equal.append(exp.EQ(this=_column(ACTION, source), expression=exp.Literal.string(DELETE)))
        return str(exp.and_(*equal).sql(dialect=_writer_dialect(writer)))

    def insert_condition(self, writer: str = "delta-rs", source: str = SOURCE_ALIAS) -> str:
        """``source.<ACTION> = 'insert'``: the condition of the not-matched insert."""
        condition = exp.EQ(this=_column(ACTION, source), expression=exp.Literal.string(INSERT))
        return str(condition.sql(dialect=_writer_dialect(writer)))

    def insert_values(self, writer: str = "delta-rs", source: str = SOURCE_ALIAS) -> dict[str, str]:
        """Target column -> source column, quoted, for the not-matched insert (the tag column
        is left out)."""
        dialect = _writer_dialect(writer)
        return {
            str(_column(f.name).sql(dialect=dialect)): str(
                _column(f.name, source).sql(dialect=dialect)
            )
            for f in self.schema
        }

    def new_columns_ddl(self) -> str:
        """The column list of Spark SQL's ``ALTER TABLE ... ADD COLUMNS (...)`` for
        :attr:`new_columns`: quoted names and Delta types, e.g. ```note` string``."""
        types = dict(delta_schema(self.schema))
        return ", ".join(
            f"{_column(name).sql(dialect='spark')} {types[name]}" for name in self.new_columns
        )

    def commit_metadata(self) -> dict[str, Any]:
        """Custom metadata for the Delta commit (the version is also the ``txn`` action's)."""
        metadata: dict[str, Any] = {
            "ledger.source": self.app_id,
            "ledger.table": self.source_name,
            "ledger.version": self.version,
            "ledger.full": self.full,
        }
        if self.previous is not None:
            metadata["ledger.previousVersion"] = self.previous
        if self.base_version is not None:
            metadata["ledger.baseVersion"] = self.base_version
        return metadata


def _column(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def _writer_dialect(writer: str) -> str:
    try:
        return WRITER_DIALECTS[writer]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown Delta writer {writer!r}; merge conditions are rendered for "
            f"{sorted(WRITER_DIALECTS)}"
        ) from None


# --- the plan: what to write, from the ledger alone ------------------------------------------


def publish_app_id(source: Table | Rollup) -> str:
    """The Delta application transaction id a source's publishes record: ``ledger:<uuid>``
    (the rollup's own table for a rollup), so a table dropped and created again under the same
    name is another source."""
    table = source_table(source)
    return APP_PREFIX + table.snapshot().state.config.table_uuid


def publish_plan(source: Table | Rollup, published: int | None) -> PublishPlan:
    """What publishing ``source`` to a Delta table that holds ledger version ``published``
    (None: no Delta table yet) must write, for any Delta writer.

    Reads the source's latest snapshot (a rollup's with its watermark) and returns, as Arrow:

    - ``up_to_date`` when ``published`` is already that version: write nothing;
    - ``full``: ``rows`` is the whole view; create the Delta table (or overwrite it) with it.
      Chosen on a first publish, and when the changes since ``published`` cannot be read any
      more (trimmed log, vacuumed files: ``reason`` says which);
    - otherwise ``merge_source()`` (delete rows for ``changed_keys``, then ``rows`` tagged
      insert) to merge with ``merge_condition()``: matched -> delete; not matched and
      ``insert_condition()`` -> insert ``insert_values()``.

    Whatever is written must record ``version`` in the same Delta commit as the application
    transaction ``app_id`` (and ``commit_metadata()``), and a writer must read that version
    back before planning: that is what makes a retry a no-op. With delta-spark::

        plan = publish_plan(table, recorded)
        source = spark.createDataFrame(plan.merge_source())  # Arrow: exact types
        spark.conf.set("spark.databricks.delta.write.txnAppId", plan.app_id)
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(plan.version))
        (DeltaTable.forPath(spark, uri).alias("target")
            .merge(source.alias("source"), plan.merge_condition("spark"))
            .whenMatchedDelete()
            .whenNotMatchedInsert(plan.insert_condition("spark"), plan.insert_values("spark"))
            .execute())  # then unset both confs: they stay on the session

    Raises :class:`SchemaError` for a column Delta cannot hold and
    :class:`InvalidArgumentError` for a source that is not a Table or Rollup.
    """
    table = source_table(source)
    if published is not None and (
        not isinstance(published, int) or isinstance(published, bool) or published < 0
    ):
        raise InvalidArgumentError(
            f"published must be the ledger version the Delta table holds (an integer >= 0) or "
            f"None, got {published!r}"
        )
    if isinstance(source, Rollup):
        snap, base_version = source.snapshot()
    else:
        snap, base_version = table.snapshot(), None
    spec = TableSpec.of(snap.state)
    schema = published_schema(spec)
    key_schema = pa.schema([schema.field(k) for k in spec.key_columns])

    def plan(full: bool, reason: str, rows: pa.Table, keys: pa.Table) -> PublishPlan:
        return PublishPlan(
            app_id=APP_PREFIX + snap.state.config.table_uuid,
            source_name=snap.name,
            version=snap.version,
            previous=published,
            full=full,
            reason=reason,
            schema=schema,
            key_columns=spec.key_columns,
            rows=rows,
            changed_keys=keys,
            base_version=base_version,
        )

    if published is not None and published >= snap.version:
        reason = f"the Delta table already holds version {published} of {snap.name!r}"
        return plan(False, reason, schema.empty_table(), key_schema.empty_table())
    found: ChangeSet | None = None
    if published is None:
        reason = "first publish"
    else:
        try:
            found = change_set(table, published, snap.version)
            reason = f"changes after version {published}"
        except SnapshotNotFoundError as e:
            reason = f"republished in full: {e}"
        if found is not None and found.replaced and repeats_cross_keys(spec):
            reason = (
                "republished in full: partitions were dropped or rewritten, and the table's "
                "dedup key is not its key, so any key's rows may have changed"
            )
            found = None
    with closing(work_connection()) as con, storage_errors(f"publishing {snap.name!r}"):
        if found is None:
            rows = all_rows(con, snap, spec, schema)
            return plan(True, reason, rows, key_schema.empty_table())
        keys = changed_keys(con, snap, spec, found).cast(key_schema)
        rows = rows_of_keys(con, snap, spec, schema, keys)
    return plan(False, reason, rows, keys)


def source_table(source: Any) -> Table:
    """The ledger table a source's publishes read (a rollup's own table);
    :class:`InvalidArgumentError` for anything but a Table or Rollup."""
    if isinstance(source, Rollup):
        return source.table
    if isinstance(source, Table):
        return source
    raise InvalidArgumentError(
        f"publish a ledger Table or Rollup, not {type(source).__name__} "
        "(e.g. publish_delta(warehouse.table('payments'), 's3://lake/payments'))"
    )
