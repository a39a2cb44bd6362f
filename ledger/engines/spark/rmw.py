"""Read-modify-write (upsert, update, delete): a Spark join against the entries of the given
keys at the transaction's snapshot finds each key's visible row and the live entries to mark,
by the Spark rendering of the embedded engine's queries (``ledger.sql.live``,
``ledger.sql.rmw``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from ledger import insert_transform
from ledger.engines.spark.convert import (
    checked_frame,
    col,
    conformed_columns,
    insert_transformed,
    spark_schema,
    transformed,
)
from ledger.engines.spark.query import bind_relations, run
from ledger.engines.spark.scan import scan_files
from ledger.engines.spark.session import to_arrow
from ledger.engines.spark.write import INSERTIONS, MARKS, write
from ledger.errors import (
    DuplicateKeyError,
    InvalidArgumentError,
    KeyNotFoundError,
    MissingKeyError,
    StaleVersionError,
)
from ledger.log.state import TableState
from ledger.schema import DML_TYPE, ROW_ID, TRX_ID, TRX_SEQ, folded_name
from ledger.sql.dialects import DIALECTS
from ledger.sql.live import (
    expanded,
    latest_entries,
    latest_live_rows,
    live_entries,
    rows_of_keys,
)
from ledger.sql.names import KIND, NULL_KEY
from ledger.sql.rmw import key_problems as key_problems_tree
from ledger.sql.rmw import stale_versions as stale_versions_tree
from ledger.sql.trees import descending, relation, render
from ledger.writer import file_schema
from merge_policies import load_policy
from merge_policies.base import MergePolicy

if TYPE_CHECKING:
    from ledger.transaction import Transaction

SPARK = DIALECTS["spark"]


def read_modify_write(tx: Transaction, data: DataFrame, operation: str) -> int:
    """Run ``operation`` (``upsert``, ``update`` or ``delete``) with the rows (or keys) of
    ``data`` in ``tx``: marks for the live entries of the keys, insertions of the new rows;
    returns the number of rows upserted, updated or deleted."""
    frame = checked_frame(data)
    if tx.begin_operation(operation):
        return 0
    config = tx.config
    if operation == "upsert" and config.generated_row_id:
        raise InvalidArgumentError(
            f"upsert needs a primary key and table {tx.table.name!r} has none; use insert for "
            "new rows, or update/delete by _row_id"
        )
    key_columns = list(tx.key_columns)
    overlay = None if operation == "delete" else PartialRows.of(tx, frame)
    if overlay is not None:
        frame = overlay.first_run()
    elif operation != "delete":
        frame = transformed(tx, frame)
    if operation == "delete":
        missing = [k for k in key_columns if k not in frame.columns]
        if missing:
            raise MissingKeyError(f"keys must give every key column; missing {missing}")
        frame = frame.select(*map(col, key_columns))
    if config.generated_row_id and ROW_ID not in frame.columns:
        raise MissingKeyError("rows of a table without a primary key are addressed by _row_id")
    passing = () if overlay is None else (overlay.ordinal,)
    rows = conformed_columns(tx, frame, require_keys=True, passing=passing)
    if operation == "delete":
        rows = rows.dropDuplicates(key_columns)  # deleting a key twice deletes it once
    has_null, duplicated = key_problems(rows, key_columns)
    if has_null:
        raise MissingKeyError(f"key column(s) {key_columns} hold NULL; every row needs a key")
    if duplicated:
        raise DuplicateKeyError(
            f"key(s) appear more than once in one operation, e.g. {duplicated}; give each key "
            "once (or split the changes into separate operations)"
        )
    state = tx.base_state
    files = [*state.alive_files, *tx.written_files]
    schema = file_schema(tx.schema, config)
    session = frame.sparkSession
    entries = scan_files(session, tx.table.store, tx.table.prefix, files, schema)
    value_columns = [*tx.schema.names, *([ROW_ID] if config.generated_row_id else [])]
    policy = _policy(state)
    floats = [c for c in value_columns if pa.types.is_floating(schema.field(c).type)]
    current, live = live_rows(
        entries,
        rows,
        key_columns,
        value_columns,
        policy.latest_order(),
        floats,
        in_entry_order=not policy.keys_independent,
    )
    if overlay is not None:
        rows = overlay.second_run(rows, current)
        # A row the transform's WHERE drops as it will be writes nothing: its key keeps its
        # row, so no mark cancels it (the first run, without the WHERE, found its key).
        live = live.join(rows.select(*map(col, key_columns)), key_columns, "left_semi")
    if operation == "update":
        absent = rows.join(current.select(*map(col, key_columns)), key_columns, "left_anti")
        examples = absent.select(*map(col, key_columns)).limit(3).collect()
        if examples:
            raise KeyNotFoundError(
                f"update of key(s) with no visible row, e.g. {[r.asDict() for r in examples]}; "
                "use upsert to insert new keys"
            )
    marks = live.withColumn(DML_TYPE, F.lit(-1).cast("tinyint")).withColumn(KIND, F.lit(MARKS))
    written = marks
    if operation != "delete":
        given = [c for c in value_columns if c in rows.columns]
        kept = [c for c in value_columns if c not in rows.columns]
        filled = rows
        if kept:
            filled = rows.join(
                current.select(*map(col, [*key_columns, *kept])), key_columns, "left"
            )
        insertions = (
            filled.select(*map(col, [*given, *kept]))
            .withColumn(DML_TYPE, F.lit(1).cast("tinyint"))
            .withColumn(KIND, F.lit(INSERTIONS))
        )
        _refuse_stale_versions(tx, entries, filled.select(*map(col, [*given, *kept])))
        written = marks.unionByName(insertions, allowMissingColumns=True)
    # Evaluate the join once: counting and writing then read the same entries.
    written = written.localCheckpoint(eager=True)
    markers, counts, _ = write(
        tx,
        written,
        check=tx.refuse_marks_if_insert_only if operation == "delete" else _replacements(tx),
    )
    deleted, total = counts
    touched = to_arrow(rows.select(*map(col, key_columns)))
    tx.add_written_files(
        markers,
        inserted=total - deleted,
        deleted=deleted,
        touched_keys=touched,
        read_files=files,
    )
    return total - deleted if operation != "delete" else deleted


@dataclass(frozen=True)
class PartialRows:
    """An upsert or update through an insert transform whose DataFrame leaves out columns the
    table has: as on the embedded engine (``insert_transform.apply_over_current``), each row is
    transformed as it will be, its key's visible row overlaid by the columns given.

    The first run (columns left out NULL) finds each row's key; the second runs over the rows
    with the current values of their keys filled in. An output column named like a column left
    out keeps the stored value of a key with a visible row (already the transform's output);
    a new key's row is transformed as an insert's, every output column kept."""

    tx: Transaction
    numbered: DataFrame
    absent: tuple[str, ...]
    ordinal: str

    @classmethod
    def of(cls, tx: Transaction, frame: DataFrame) -> PartialRows | None:
        """The plan, or None when the table has no transform or the frame gives every column
        the transform could read."""
        sql = tx.config.insert_transform
        if sql is None:
            return None
        given = {folded_name(c) for c in frame.columns}
        made = insert_transform.made_columns(sql)
        value_columns = [*tx.schema.names, *([ROW_ID] if tx.config.generated_row_id else [])]
        absent = tuple(
            c for c in value_columns if folded_name(c) not in given and folded_name(c) not in made
        )
        if not absent:
            return None
        ordinal = insert_transform.unused_name("row_ordinal", frame.columns)
        # Checkpointed: the second run must see the very numbers the first one did.
        numbered = frame.withColumn(ordinal, F.monotonically_increasing_id())
        return cls(tx, numbered.localCheckpoint(eager=True), absent, ordinal)

    def first_run(self) -> DataFrame:
        """The transform over the rows with the columns they leave out NULL, passing the row
        number through."""
        sql = self.tx.config.insert_transform
        assert sql is not None  # PartialRows.of made sure
        types = spark_schema(file_schema(self.tx.schema, self.tx.config))
        nulls = [F.lit(None).cast(types[c].dataType).alias(c) for c in self.absent]
        frame = self.numbered.select("*", *nulls)
        finding = insert_transform.finding_keys(sql, self.ordinal)
        # A failure names the transform and the columns the caller gave.
        hidden = (self.ordinal, *self.absent)
        return insert_transformed(frame, finding, shown=sql, hidden=hidden)

    def second_run(self, first: DataFrame, current: DataFrame) -> DataFrame:
        """The conformed rows of the transform over each row overlaid on its key's visible row
        (``current``; NULL for a new key)."""
        sql = self.tx.config.insert_transform
        assert sql is not None
        keys = list(self.tx.key_columns)
        found = insert_transform.unused_name("key_found", [*self.numbered.columns, *self.absent])
        values = current.select(*map(col, [*keys, *self.absent]), F.lit(True).alias(found))
        keyed = first.select(col(self.ordinal), *map(col, keys)).join(values, keys, "left")
        overlaid = self.numbered.join(keyed.drop(*keys), self.ordinal, "inner").drop(self.ordinal)
        shaped = insert_transformed(overlaid.drop(found), sql)
        left_out = {folded_name(c) for c in self.absent}
        kept = [c for c in shaped.columns if folded_name(c) not in left_out]
        if len(kept) == len(shaped.columns):
            return conformed_columns(self.tx, shaped, require_keys=True)
        # A column the transform rewrites in place: the stored value for a key that has one
        # (given as it is, which writes what leaving it out would), the output for a new key.
        new_keys = conformed_columns(
            self.tx,
            insert_transformed(overlaid.filter(col(found).isNull()).drop(found), sql),
            require_keys=True,
        )
        rewritten = [c for c in new_keys.columns if folded_name(c) in left_out]
        stored = conformed_columns(
            self.tx,
            insert_transformed(overlaid.filter(col(found).isNotNull()).drop(found), sql).select(
                *map(col, kept)
            ),
            require_keys=True,
        ).join(current.select(*map(col, [*keys, *rewritten])), keys, "left")
        return new_keys.unionByName(stored.select(*map(col, new_keys.columns)))


def _refuse_stale_versions(tx: Transaction, entries: DataFrame, rows: DataFrame) -> None:
    """The rule of the embedded upsert and update where a key's latest entry is the one with
    the highest version (a policy whose ``latest_order`` ranks by a column before ``trx_id``):
    a new row never ranks below its key's latest entry."""
    latest_order = _policy(tx.base_state).latest_order()
    version_column = _version_column(latest_order)
    if latest_order is None or version_column is None:
        return
    stale = stale_versions(entries, rows, tx.key_columns, version_column, latest_order)
    examples = stale.limit(3).collect()
    if examples:
        raise StaleVersionError(
            f"row(s) give {version_column!r} a version below the current version of "
            f"their key (NULL ranks lowest), e.g. {[r.asDict() for r in examples]}; table "
            f"{tx.table.name!r} shows the row with the highest version, so give a version at "
            "or above the current one (insert records an older version without replacing the "
            "newer row)"
        )


def _policy(state: TableState) -> MergePolicy:
    return load_policy(state.config.policy, state.schema, state.config)


def _version_column(latest_order: Sequence[str] | None) -> str | None:
    """The user column ranking a key's entries before their order in the ledger, if any."""
    ranked = [c for c in latest_order or () if c not in (TRX_ID, TRX_SEQ)]
    return ranked[0] if ranked else None


def live_rows(
    entries: DataFrame,
    keys: DataFrame,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    latest_first: Sequence[str] | None = None,
    float_columns: Sequence[str] = (),
    *,
    in_entry_order: bool = False,
) -> tuple[DataFrame, DataFrame]:
    """For ``keys``: the visible row of each key, and one row per live entry (the delete marks
    an update writes): the Spark rendering of the trees the embedded engine runs
    (``ledger.sql.live``; ``float_columns``: the FLOAT/DOUBLE ones, whose -0.0 and 0.0 stay
    apart).

    ``latest_first`` (columns, each descending with NULLs last) switches to replacing
    semantics: a key's only live entry is its latest entry, if that is an insertion.

    ``in_entry_order`` sorts the live entries by the earliest insertion each cancels, as the
    embedded engine writes its marks: where keys are not independent (a dedup key several keys
    share) the first mark written is the one kept. The sorted frame's partitions are in order,
    and the writer numbers ``trx_seq`` partition after partition. Elsewhere the order changes
    no answer and the sort's shuffle is left out."""
    session = entries.sparkSession
    names = bind_relations({"entries": entries, "keys": keys.select(*map(col, key_columns))})
    touched = exp.paren(rows_of_keys(names["entries"], names["keys"], key_columns), copy=False)
    if latest_first is None:
        live_query = live_entries(
            value_columns, float_columns, SPARK, net_type="BIGINT", first_order=in_entry_order
        )
        live_query = live_query.from_(touched)
    else:
        float_columns = ()
        live_query = latest_entries(
            touched, key_columns, value_columns, descending(latest_first), SPARK
        )
    live = bind_relations({"live": run(session, render(live_query, SPARK))})["live"]
    visible = latest_live_rows(relation(live), key_columns, value_columns, float_columns)
    marks = expanded(relation(live), value_columns, float_columns, in_entry_order=in_entry_order)
    return run(session, render(visible, SPARK)), run(session, render(marks, SPARK))


def stale_versions(
    entries: DataFrame,
    rows: DataFrame,
    key_columns: Sequence[str],
    version_column: str,
    latest_first: Sequence[str],
) -> DataFrame:
    """The rows whose version ranks below the version of their key's latest entry (a delete
    mark counts), as the embedded engine finds them (``ledger.sql.rmw``): key columns,
    ``given`` and ``current``. A NULL version ranks below every other version."""
    names = bind_relations(
        {"entries": entries, "rows": rows.select(*map(col, [*key_columns, version_column]))}
    )
    query = stale_versions_tree(
        names["entries"], names["rows"], key_columns, version_column, descending(latest_first)
    )
    return run(entries.sparkSession, render(query, SPARK))


def key_problems(
    rows: DataFrame, key_columns: Sequence[str], limit: int = 3
) -> tuple[bool, list[dict[str, Any]]]:
    """In one job: whether a key column of ``rows`` holds NULL, and up to ``limit`` keys that
    appear more than once."""
    keys = list(key_columns)
    names = bind_relations({"rows": rows})
    query = key_problems_tree(names["rows"], keys, limit)
    found = run(rows.sparkSession, render(query, SPARK)).collect()
    has_null = bool(found) and bool(found[0][NULL_KEY])
    duplicated = [{k: r[k] for k in keys} for r in found if not r[NULL_KEY]]
    return has_null, duplicated[:limit]


def _replacements(tx: Transaction) -> Callable[[int], None]:
    """The checks of an update's or upsert's marks: the table takes marks, and keeps the rows
    that replace the marked ones."""

    def check(marks: int) -> None:
        tx.refuse_marks_if_insert_only(marks)
        tx.refuse_replacements_dropped_as_repeats(marks)

    return check
