"""Publishing a ledger view to a Delta Lake table, incrementally and exactly once.

What is published: the visible rows of a table (:func:`views.visible`; ``_row_id`` too for
tables without a primary key), or the totals of a rollup (one row per group, groups holding no
rows left out). The first publish creates the Delta table from the latest snapshot. Each later
one reads the ledger's change set since the version the Delta table holds (``ledger.changes``),
takes the keys its entries touch, reads the view's current rows of those keys, and applies one
Delta MERGE. A key may have several visible rows (blind inserts into a collapsing table), so
source rows are never paired with target rows one to one:

    source = one 'delete' row per changed key + the key's current rows tagged 'insert'
    MERGE ON <key columns equal> AND source.tag = 'delete'
      WHEN MATCHED THEN DELETE
      WHEN NOT MATCHED AND source.tag = 'insert' THEN INSERT

The ledger version goes into the same Delta commit, as an application transaction (a ``txn``
action: app id ``ledger:<table uuid>``, version = the ledger version) and as commit metadata.
So a publish that crashed after its commit is recognised by the next one (a no-op), and two
racing publishers conflict in Delta (the loser starts again from the version the winner
recorded). When the changes since the recorded version can no longer be read (the ledger's log
was trimmed or its files vacuumed), the view is republished in full, recorded the same way.

:func:`publish_plan` is everything that does not depend on the Delta writer, so that an engine
writing Delta itself (delta-spark's ``DeltaTable.merge``) follows the same rules.

>>> views.publish_delta(payments, "s3://lake/payments", storage_options=opts)  # doctest: +SKIP
PublishResult(version=12, previous=9, rows_deleted=3, rows_inserted=4, ...)
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from ledger.changes import ChangeSet, change_set
from ledger.engines.duckdb.changes import change_entries
from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations, connect
from ledger.errors import (
    ConflictError,
    InvalidArgumentError,
    MissingDependencyError,
    SchemaError,
    SnapshotNotFoundError,
)
from ledger.pruning import prune_by_keys
from ledger.reads.visible import visible
from ledger.rollup import Rollup
from ledger.schema import ROW_ID
from ledger.snapshot import Snapshot
from ledger.sql import ident, idents
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ACTION
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, render
from ledger.sql.visible import visible as visible_tree
from ledger.table import Table
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

APP_PREFIX = "ledger:"  # app id of the Delta application transaction: ledger:<table uuid>
DELETE = "delete"
INSERT = "insert"
TARGET_ALIAS = "target"
SOURCE_ALIAS = "source"
COMMIT_RETRIES = 5
# How each Delta writer parses the merge conditions it is given: delta-rs (DataFusion) takes
# standard SQL with "double-quoted" names, Spark `backticks` (sqlglot dialect names).
WRITER_DIALECTS = {"delta-rs": "", "spark": "spark"}
_MISSING = "publishing to Delta Lake needs deltalake: pip install 'ledger-tables[delta]'"

# Arrow type -> Delta Lake primitive type; timestamps and decimals are handled apart.
_DELTA_TYPES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "byte",
    pa.int16(): "short",
    pa.int32(): "integer",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
    pa.large_binary(): "binary",
    pa.date32(): "date",
}


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
    table = _source_table(source)
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
        source = spark.createDataFrame(plan.merge_source().to_pandas())
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
    table = _source_table(source)
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
        if found is not None and found.replaced and _repeats_cross_keys(spec):
            reason = (
                "republished in full: partitions were dropped or rewritten, and the table's "
                "dedup key is not its key, so any key's rows may have changed"
            )
            found = None
    with closing(connect()) as con, storage_errors(f"publishing {snap.name!r}"):
        if found is None:
            rows = _all_rows(con, snap, spec, schema)
            return plan(True, reason, rows, key_schema.empty_table())
        keys = _changed_keys(con, snap, spec, found).cast(key_schema)
        rows = _rows_of_keys(con, snap, spec, schema, keys)
    return plan(False, reason, rows, keys)


def _source_table(source: Any) -> Table:
    if isinstance(source, Rollup):
        return source.table
    if isinstance(source, Table):
        return source
    raise InvalidArgumentError(
        f"publish a ledger Table or Rollup, not {type(source).__name__} "
        "(e.g. publish_delta(warehouse.table('payments'), 's3://lake/payments'))"
    )


def _repeats_cross_keys(spec: TableSpec) -> bool:
    """Whether an entry of one key can be a repeat of another key's entry (dedup tables with
    their own dedup key), so that a key's rows depend on entries of other keys."""
    return not spec.policy.keys_independent


def published_schema(spec: TableSpec) -> pa.Schema:
    """The columns a table's view publishes: its user columns, and ``_row_id`` when it has
    no primary key (the key the merge matches on). Raises :class:`SchemaError` for a column
    Delta Lake cannot hold."""
    fields = [pa.field(c, t) for c, t in zip(spec.columns, spec.types, strict=True)]
    if spec.generated_row_id:
        fields.append(pa.field(ROW_ID, pa.int64()))
    schema = pa.schema(fields)
    delta_schema(schema)
    return schema


def delta_schema(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(column, Delta Lake type)`` for each field, e.g. ``("amount", "decimal(18,2)")``.

    Raises :class:`SchemaError` for types Delta Lake has no lossless equivalent for (unsigned
    integers, times of day, nested types, ...): deltalake itself would silently map an
    ``uint32`` to a signed ``integer``.

    >>> delta_schema(pa.schema([("at", pa.timestamp("us"))]))
    [('at', 'timestamp_ntz')]
    """
    return [(f.name, _delta_type(f.name, f.type)) for f in schema]


def _delta_type(name: str, data_type: pa.DataType) -> str:
    if data_type in _DELTA_TYPES:
        return _DELTA_TYPES[data_type]
    if pa.types.is_decimal(data_type) and data_type.bit_width == 128:
        return f"decimal({data_type.precision},{data_type.scale})"
    if pa.types.is_timestamp(data_type) and data_type.unit == "us":
        if data_type.tz is None:
            return "timestamp_ntz"
        if data_type.tz in ("UTC", "+00:00"):
            return "timestamp"
    raise SchemaError(
        f"column {name!r} is {data_type}, which Delta Lake cannot hold; Delta's types are "
        "boolean, byte, short, integer, long, float, double, string, binary, date, timestamp "
        "(UTC), timestamp_ntz (microseconds) and decimal(p <= 38, s): publish a view whose "
        "columns have those types"
    )


def _all_rows(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, spec: TableSpec, schema: pa.Schema
) -> pa.Table:
    relation = visible(snap, con, system_columns=spec.generated_row_id)
    name = bind_relations(con, {"rows": relation})["rows"]
    rows = con.sql(f"SELECT {idents(schema.names)} FROM {ident(name)}").to_arrow_table()
    return rows.cast(schema)


def _changed_keys(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, spec: TableSpec, found: ChangeSet
) -> pa.Table:
    """The distinct keys of the change set's entries: only their rows can have changed (an
    entry of one key never changes another key's rows, dedup keys aside)."""
    schema = file_schema(snap.state.schema, snap.state.config)
    entries = change_entries(con, snap.store, snap.prefix, found, schema)
    name = bind_relations(con, {"changes": entries})["changes"]
    keys = idents(list(spec.key_columns))
    return con.sql(f"SELECT DISTINCT {keys} FROM {ident(name)}").to_arrow_table()


def _rows_of_keys(
    con: duckdb.DuckDBPyConnection,
    snap: Snapshot,
    spec: TableSpec,
    schema: pa.Schema,
    keys: pa.Table,
) -> pa.Table:
    """The view's current rows of ``keys``: the view over the entries of those keys only
    (files pruned by their key ranges), except where repeats cross keys (then the whole view,
    filtered)."""
    if keys.num_rows == 0:
        return schema.empty_table()
    using = idents(list(spec.key_columns))
    markers = snap.markers()
    by_key = not _repeats_cross_keys(spec)
    if by_key:
        markers = prune_by_keys(markers, keys, spec.key_columns)
    entries = scan_files(
        con, snap.store, snap.prefix, markers, file_schema(snap.state.schema, snap.state.config)
    )
    names = bind_relations(con, {"entries": entries, "keys": con.from_arrow(keys)})
    source = names["entries"]
    if by_key:
        source = bind_relations(
            con,
            {
                "wanted": con.sql(
                    f"SELECT * FROM {ident(names['entries'])} "
                    f"SEMI JOIN {ident(names['keys'])} USING ({using})"
                )
            },
        )["wanted"]
    duckdb_dialect = DIALECTS["duckdb"]
    query = visible_tree(
        spec, duckdb_dialect, Sources(entries=source), system_columns=spec.generated_row_id
    )
    shown = bind_relations(con, {"rows": con.sql(render(query, duckdb_dialect))})["rows"]
    sql = f"SELECT {idents(schema.names)} FROM {ident(shown)}"
    if not by_key:
        sql += f" SEMI JOIN {ident(names['keys'])} USING ({using})"
    return con.sql(sql).to_arrow_table().cast(schema)


# --- publishing with deltalake (delta-rs) ------------------------------------------------------


def published_version(
    target: str | os.PathLike[str],
    source: Table | Rollup,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> int | None:
    """The ledger version of ``source`` the Delta table at ``target`` holds (None: there is no
    Delta table there, or it records no publish of ``source``).

    >>> views.publish.published_version("/lake/payments", payments)   # doctest: +SKIP
    12
    """
    _source_table(source)
    existing = _open_target(_target_uri(target), _storage_options(storage_options))
    return None if existing is None else existing.transaction_version(publish_app_id(source))


def publish_delta(
    source: Table | Rollup,
    target: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
) -> PublishResult:
    """Publish the visible rows of a table, or the totals of a rollup, to the Delta Lake table
    at ``target`` (a path or URI; ``storage_options`` go to deltalake, e.g. S3 credentials).

    The first publish creates the Delta table; later ones merge what changed since the ledger
    version it holds, in one Delta commit that records the new version (application
    transaction ``ledger:<table uuid>``). At a version the Delta table already holds it does
    nothing (``skipped``); when the changes since then were vacuumed from the ledger it
    republishes in full (``full``). A rollup is published as it is: refresh it first.

    Raises :class:`InvalidArgumentError` for a source that is not a Table or Rollup, or a
    target that holds something else than publishes of ``source``; :class:`SchemaError` for a
    target whose columns differ from the view's (after a schema change: publish to a new
    target) or a column type Delta cannot hold. Nothing is written then.

    >>> views.publish_delta(payments, "/lake/payments")              # doctest: +SKIP
    PublishResult(version=3, previous=None, rows_deleted=0, rows_inserted=2, full=True, ...)
    """
    _source_table(source)
    uri = _target_uri(target)
    options = _storage_options(storage_options)
    _require_deltalake()
    from deltalake.exceptions import CommitFailedError

    for attempt in range(COMMIT_RETRIES):
        try:
            return _publish_once(source, uri, options)
        except (CommitFailedError, _LostRace) as e:
            # Another publisher committed first: start again from what it recorded.
            log.info("publish to %s lost a commit race (attempt %d): %s", uri, attempt + 1, e)
    raise ConflictError(
        f"publishing to {uri}: {COMMIT_RETRIES} Delta commits in a row lost a race with other "
        "writers; retry later"
    )


def target_plan(
    source: Table | Rollup,
    target: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
) -> PublishPlan:
    """The :func:`publish_plan` for the Delta table at ``target`` as it is now, after the checks
    every Delta writer must make before writing: the target records publishes of ``source``
    (else :class:`InvalidArgumentError`) and has the view's columns (else :class:`SchemaError`).
    Nothing is written.

    >>> views.publish.target_plan(payments, "/lake/payments").up_to_date  # doctest: +SKIP
    True
    """
    _source_table(source)
    uri = _target_uri(target)
    return _checked_plan(source, uri, _open_target(uri, _storage_options(storage_options)))


def _checked_plan(source: Table | Rollup, uri: str, existing: DeltaTable | None) -> PublishPlan:
    recorded = None
    if existing is not None:
        recorded = existing.transaction_version(publish_app_id(source))
        if recorded is None:
            raise InvalidArgumentError(_other_source(existing, uri, _source_table(source).name))
    plan = publish_plan(source, recorded)
    if existing is not None:
        plan = dataclasses.replace(plan, new_columns=_check_target_schema(existing, plan, uri))
    return plan


def _publish_once(
    source: Table | Rollup, uri: str, options: dict[str, str] | None
) -> PublishResult:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    existing = _open_target(uri, options)
    plan = _checked_plan(source, uri, existing)
    if plan.up_to_date:
        return PublishResult(
            version=plan.previous if plan.previous is not None else plan.version,
            previous=plan.previous,
            rows_deleted=0,
            rows_inserted=0,
            full=False,
            skipped=True,
            base_version=plan.base_version,
            reason=plan.reason,
        )
    if existing is not None and plan.new_columns:
        _add_new_columns(existing, plan)
    properties = CommitProperties(
        custom_metadata=plan.commit_metadata(),
        app_transactions=[Transaction(plan.app_id, plan.version)],
    )
    # delta-rs retries a commit that lost its version to another writer when its conflict
    # check passes, and that check lets a second table creation through (committed as version
    # 1: every row twice). Full writes therefore never retry inside delta-rs: a lost commit
    # comes back here and starts again from the version the winner recorded.
    once = CommitProperties(
        custom_metadata=plan.commit_metadata(),
        max_commit_retries=0,
        app_transactions=[Transaction(plan.app_id, plan.version)],
    )
    if plan.full and existing is None:
        try:
            write_deltalake(
                uri,
                plan.rows,
                mode="error",
                name=plan.source_name,
                description=f"published from ledger table {plan.source_name!r} ({plan.app_id})",
                storage_options=options,
                commit_properties=once,
            )
        except CommitFailedError:
            raise
        except DeltaError:
            if _open_target(uri, options) is None:
                raise
            # Another publisher created it first: start again from what it recorded.
            raise _LostRace(f"{uri} was created by another writer") from None
        deleted, inserted = 0, plan.rows.num_rows
        delta_version = DeltaTable(uri, storage_options=options).version()
    elif plan.full:
        assert existing is not None
        deleted, inserted = existing.count(), plan.rows.num_rows
        # In the target's column order: columns added since the first publish come last there.
        rows = plan.rows.select([f.name for f in existing.schema().fields])
        write_deltalake(existing, rows, mode="overwrite", commit_properties=once)
        delta_version = existing.version()
    else:
        assert existing is not None
        before = existing.version()
        metrics = (
            existing.merge(
                plan.merge_source(),
                plan.merge_condition(),
                source_alias=SOURCE_ALIAS,
                target_alias=TARGET_ALIAS,
                # Source statistics let delta-rs skip target files no changed key can be in.
                streamed_exec=False,
                commit_properties=properties,
            )
            .when_matched_delete()
            .when_not_matched_insert(plan.insert_values(), plan.insert_condition())
            .execute()
        )
        if existing.version() == before:
            # delta-rs commits nothing for a merge that changes no row (e.g. only ledger merges
            # since the last publish): record the version in an empty commit instead.
            existing.create_write_transaction(
                [], mode="append", schema=existing.schema(), commit_properties=properties
            )
            existing.update_incremental()
        deleted = int(metrics["num_target_rows_deleted"])
        inserted = int(metrics["num_target_rows_inserted"])
        delta_version = existing.version()
    return PublishResult(
        version=plan.version,
        previous=plan.previous,
        rows_deleted=deleted,
        rows_inserted=inserted,
        full=plan.full,
        skipped=False,
        delta_version=delta_version,
        base_version=plan.base_version,
        reason=plan.reason,
    )


def _target_uri(target: Any) -> str:
    if isinstance(target, str | os.PathLike):
        uri = os.fspath(target)
        if isinstance(uri, str) and uri:
            return uri
    raise InvalidArgumentError(
        f"target must be the path or URI of a Delta table (e.g. 's3://lake/payments'), "
        f"got {target!r}"
    )


def _storage_options(options: Any) -> dict[str, str] | None:
    if options is None:
        return None
    if not isinstance(options, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.items()
    ):
        raise InvalidArgumentError(
            "storage_options must map option names to strings, e.g. "
            '{"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}'
        )
    return dict(options)


class _LostRace(Exception):
    """Another writer created the target first."""


def _require_deltalake() -> None:
    try:
        import deltalake  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(_MISSING) from e


def _open_target(uri: str, options: dict[str, str] | None) -> DeltaTable | None:
    _require_deltalake()
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return None
    return DeltaTable(uri, storage_options=options)


def _other_source(existing: DeltaTable, uri: str, name: str) -> str:
    description = existing.metadata().description
    holds = f" (it says: {description!r})" if description else ""
    return (
        f"the Delta table at {uri} holds no publish of ledger table {name!r}{holds}: it was "
        "written by another source or another tool; publish to a new target, or delete it "
        "first"
    )


def _check_target_schema(existing: DeltaTable, plan: PublishPlan, uri: str) -> tuple[str, ...]:
    """The published columns the target lacks (new columns of the source, which writers add);
    :class:`SchemaError` when a target column is not published any more or has another type
    (a widened column), which no append of columns can follow."""
    wanted = delta_schema(plan.schema)
    found = [(f.name, str(getattr(f.type, "type", f.type))) for f in existing.schema().fields]
    if not set(found) <= set(wanted):
        raise SchemaError(
            f"the Delta table at {uri} has columns {found}, but {plan.source_name!r} publishes "
            f"{wanted}; new columns are added to the target, but after a change of a column's "
            "type, publish to a new target (or delete it first)"
        )
    present = {name for name, _ in found}
    return tuple(name for name, _ in wanted if name not in present)


def _add_new_columns(existing: DeltaTable, plan: PublishPlan) -> None:
    """Add the published columns the target lacks, in one Delta commit that changes no row
    (a crash after it leaves columns the next publish finds present)."""
    from deltalake import Field

    fields = [Field.from_arrow(plan.schema.field(name)) for name in plan.new_columns]
    existing.alter.add_columns(fields)
    existing.update_incremental()
