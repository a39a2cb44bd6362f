"""Materialized rollups: an aggregating table that follows a base ledger exactly once.

A rollup table is keyed by its ``by`` columns; each measure is ``count`` (rows), ``count(x)``
(non-NULL values) or ``sum(x)``. A refresh reads what the base committed after the rollup's
watermark (a base version), sums it per group with every entry weighted by its ``dml_type``,
and appends those deltas to the rollup table in one commit that also records the new watermark
(the rollup table's idempotency token ``rollup:<base table uuid>`` set to the base version). The
commit is accepted only if the watermark is still the one the refresh started from, so a crash
between any two steps leaves either nothing or the whole refresh, and of two racing refreshes
one commits and the other starts again from the new watermark.

>>> measures = {"views": "count", "seconds": "sum(duration)"}
>>> daily = events.create_rollup("daily", by=["user_id"], measures=measures)  # doctest: +SKIP
>>> daily.refresh()                                                               # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from ledger import hooks, lifecycle
from ledger.arguments import column_names
from ledger.changes import ChangeSet, change_set
from ledger.engines import engine_named
from ledger.engines.duckdb.errors import VALUE_ERRORS, engine_reason
from ledger.engines.duckdb.session import bind_relations, work_connection
from ledger.errors import (
    ConflictError,
    InvalidArgumentError,
    LedgerError,
    TableNotFoundError,
    TypeMismatchError,
    UnknownColumnError,
)
from ledger.log.commit import next_timestamp
from ledger.log.entries import LogFile
from ledger.log.state import TableState
from ledger.schema import arrow_to_sql, folded_name
from ledger.snapshot import Snapshot
from ledger.sql.dialects import DIALECTS
from ledger.sql.rollups import RollupMeasure, group_deltas
from ledger.sql.trees import render
from ledger.sql_guard import check_expression, without_terminal_codes
from ledger.transaction import Transaction
from ledger.writer import file_schema
from merge_policies import load_policy
from merge_policies.aggregating import policy_spec

if TYPE_CHECKING:
    from ledger.storage import Store
    from ledger.table import Table

log = logging.getLogger(__name__)

FUNCTIONS = ("count", "sum")
ROW_COUNT = "row_count"  # added when no measure counts rows: a group is gone when it is 0
REFRESH_RETRIES = 20
_EXAMPLE = '{"views": "count", "seconds": "sum(duration)", "rated": "count(rating)"}'


@dataclass(frozen=True)
class Measure(RollupMeasure):
    """One rollup column: ``function`` of ``column`` (None: rows), as its config stores it."""

    def to_json(self) -> list[Any]:
        return [self.name, self.function, self.column]


@dataclass(frozen=True)
class RollupDefinition:
    """What a rollup table rolls up; stored in its log config."""

    base: str
    base_uuid: str
    by: tuple[str, ...]
    measures: tuple[Measure, ...]

    @property
    def app_id(self) -> str:
        """The idempotency token whose batch is the watermark (a base version)."""
        return f"rollup:{self.base_uuid}"

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "base_uuid": self.base_uuid,
            "by": list(self.by),
            "measures": [m.to_json() for m in self.measures],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RollupDefinition:
        return RollupDefinition(
            base=str(data["base"]),
            base_uuid=str(data["base_uuid"]),
            by=tuple(data["by"]),
            measures=tuple(Measure(str(n), str(f), c) for n, f, c in data["measures"]),
        )


@dataclass(frozen=True)
class RefreshResult:
    """What one :meth:`Rollup.refresh` did: the rollup version it committed (None if the rollup
    was already at the base's latest version) and the base version now rolled up."""

    version: int | None
    watermark: int
    groups: int


class Rollup:
    """A rollup table and the base table it follows."""

    def __init__(self, table: Table, base: Table, definition: RollupDefinition) -> None:
        self.table = table
        self.base = base
        self.definition = definition

    def __repr__(self) -> str:
        return f"Rollup({self.table.name!r} of {self.base.name!r}, watermark={self.watermark})"

    @property
    def watermark(self) -> int | None:
        """The base version the rollup holds, or None before its first refresh."""
        batch = self.table.handle.latest_state().apps.get(self.definition.app_id)
        return None if batch is None else int(batch)

    def snapshot(self) -> tuple[Snapshot, int | None]:
        """The rollup's latest snapshot and the base version it is consistent with: read the
        base at that version to compare (``views.totals(base, version=watermark)``)."""
        snap = self.table.snapshot()
        batch = snap.state.apps.get(self.definition.app_id)
        return snap, None if batch is None else int(batch)

    def refresh(self) -> RefreshResult:
        """Roll up the base's commits since the watermark, exactly once.

        A refresh that loses a race to another starts again from the new watermark.
        Raises :class:`~ledger.errors.SnapshotNotFoundError` when the base commits since the
        watermark were vacuumed (then :meth:`rebuild`).
        """
        return self.refresh_with(embedded_deltas)

    def rebuild(self) -> RefreshResult:
        """Recompute the rollup from the base's latest snapshot (after the base commits since
        the watermark were vacuumed): one commit appends, per group, the difference between the
        fresh totals and what the rollup holds, with the same exactly-once rule as a refresh.
        At an unchanged base version it does nothing (the watermark is already committed)."""
        return self.refresh_with(embedded_deltas, rebuild=True)

    def refresh_with(self, deltas: DeltaFunction, *, rebuild: bool = False) -> RefreshResult:
        """:meth:`refresh` (or with ``rebuild``, :meth:`rebuild`) with the group deltas computed
        by ``deltas``: how an engine other than the embedded one refreshes a rollup, with the
        same exactly-once rule and retries.

        >>> rollup.refresh_with(spark_deltas)                            # doctest: +SKIP
        """
        for _ in range(REFRESH_RETRIES):
            try:
                return self._refresh_once(rebuild=rebuild, deltas=deltas)
            except ConflictError:
                continue
        raise ConflictError(
            f"rollup {self.table.name!r}: {REFRESH_RETRIES} refreshes in a row lost a race with "
            "other refreshes; retry later"
        )

    def _refresh_once(self, *, rebuild: bool, deltas: DeltaFunction) -> RefreshResult:
        state = self.table.handle.latest_state()
        watermark = state.apps.get(self.definition.app_id)
        base_state = self.base.handle.latest_state()
        target = base_state.version
        if watermark is not None and watermark >= target and not rebuild:
            return RefreshResult(None, int(watermark), 0)
        found = None
        if watermark is not None and not rebuild:
            found = change_set(self.base, int(watermark), target)
        changed = deltas(DeltaRequest(self, base_state, state, found, rebuild))
        return self._commit(changed, target, watermark)

    def _commit(self, deltas: pa.Table, target: int, watermark: int | None) -> RefreshResult:
        tx = Transaction(
            self.table,
            app_id=self.definition.app_id,
            batch=target,
            follows_batch=-1 if watermark is None else int(watermark),
            commit_empty=True,
        )
        try:
            if deltas.num_rows:
                tx.insert(deltas)
            info = tx.commit()
        except BaseException:
            tx.abort()
            raise
        if info.version is None:  # another refresh committed this base version first
            return RefreshResult(
                None, int(self.table.handle.latest_state().apps[self.definition.app_id]), 0
            )
        return RefreshResult(info.version, target, deltas.num_rows)


@dataclass(frozen=True)
class DeltaRequest:
    """What a refresh rolls up: the base commits of ``changes`` (since the watermark), or the
    whole base at ``base_state`` when ``changes`` is None; a ``rebuild`` also cancels what the
    rollup holds at ``rollup_state``."""

    rollup: Rollup
    base_state: TableState
    rollup_state: TableState
    changes: ChangeSet | None
    rebuild: bool


DeltaFunction = Callable[[DeltaRequest], pa.Table]


def embedded_deltas(request: DeltaRequest) -> pa.Table:
    """The group deltas of a refresh, computed on the embedded DuckDB engine."""
    rollup, base = request.rollup, request.rollup.base
    with closing(work_connection()) as con:
        if request.changes is None:
            entries = Snapshot(base.name, base.store, base.prefix, request.base_state).scan(con=con)
        else:
            schema = file_schema(request.base_state.schema, request.base_state.config)
            entries = engine_named("duckdb").change_entries(
                con, base.store, base.prefix, request.changes, schema
            )
        held = None
        if request.rebuild:
            table = rollup.table
            held = Snapshot(table.name, table.store, table.prefix, request.rollup_state).scan(
                con=con
            )
        types = request.rollup_state.schema.to_json()
        return _group_deltas(con, entries, rollup.definition, types, held)


def _group_deltas(
    con: Any,
    entries: Any,
    definition: RollupDefinition,
    types: Mapping[str, str],
    held: Any = None,
) -> pa.Table:
    """Per group, the sign-weighted change of every measure over ``entries``, less what the
    rollup's own entries ``held`` add up to (a rebuild); groups that do not change are left
    out."""
    names = bind_relations(
        con, {"changes": entries, **({"held": held} if held is not None else {})}
    )
    query = group_deltas(
        definition.by, definition.measures, types, names["changes"], names.get("held")
    )
    try:
        result: pa.Table = con.sql(render(query, DIALECTS["duckdb"])).to_arrow_table()
    except VALUE_ERRORS as e:
        # A typed error: an auto refresh logs it instead of failing the base's write.
        raise TypeMismatchError(
            f"a total of rollup measures {[m.name for m in definition.measures]} does not fit "
            f"its column ({engine_reason(e)}); nothing was written. A sum of integers is kept "
            "as BIGINT: roll up a DECIMAL column for larger totals"
        ) from e
    return result


# --- creating a rollup ---------------------------------------------------------------------------


def parse_measures(
    measures: Mapping[str, Any], base_types: Mapping[str, pa.DataType], by: Sequence[str]
) -> tuple[Measure, ...]:
    """``{"name": "count" | "count(col)" | "sum(col)"}`` as measures; a row count is added
    (as ``row_count``) when none is given."""
    if not isinstance(measures, Mapping) or not measures:
        raise InvalidArgumentError(f"a rollup needs measures, e.g. {_EXAMPLE}")
    out = []
    seen = {folded_name(c) for c in by}  # SQL engines compare names without case
    for name, text in measures.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"measure names must be non-empty strings, got {name!r}")
        if folded_name(name) in seen:
            raise InvalidArgumentError(
                f"measure {name!r} has the name of a by column or another measure (names are "
                "compared without case)"
            )
        seen.add(folded_name(name))
        function, column = _parse_measure(name, text)
        if column is not None and column not in base_types:
            raise UnknownColumnError(
                f"measure {name!r} reads {column!r}, which is not a column of the base table "
                f"(columns: {list(base_types)})"
            )
        if function == "sum" and column is not None and not _numeric(base_types[column]):
            raise InvalidArgumentError(
                f"measure {name!r}: cannot sum {column!r} ({base_types[column]}); sum a numeric "
                "column"
            )
        out.append(Measure(name, function, column))
    rows = [m for m in out if m.function == "count" and m.column is None]
    if rows:
        # The first row count comes first among counts: a rollup row is gone when it is 0.
        return (rows[0], *(m for m in out if m is not rows[0]))
    if ROW_COUNT in seen:
        raise InvalidArgumentError(
            f'add a row count measure (e.g. "rows": "count"): the rollup needs one, and '
            f"{ROW_COUNT!r} is taken"
        )
    return (Measure(ROW_COUNT, "count", None), *out)


def _parse_measure(name: str, text: Any) -> tuple[str, str | None]:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"measure {name!r} must be a string like {_EXAMPLE}")
    if text.strip().lower() in ("count", "count(*)"):
        return "count", None
    try:
        tree = sqlglot.parse_one(text, dialect="duckdb")
    except sqlglot.errors.ParseError as e:
        raise InvalidArgumentError(
            f"measure {name!r}: cannot parse {text!r}: {without_terminal_codes(str(e))}"
        ) from e
    check_expression(tree, text, f"measure {name!r}")
    kinds = {exp.Sum: "sum", exp.Count: "count"}
    function = next((f for k, f in kinds.items() if type(tree) is k), None)
    argument = tree.this if function else None
    if function is None or not isinstance(argument, exp.Column):
        refused = (
            " (min and max cannot be undone by a delete mark; avg is a sum divided by a count)"
            if isinstance(tree, exp.Min | exp.Max | exp.Avg)
            else ""
        )
        raise InvalidArgumentError(
            f"measure {name!r} is {text!r}; a rollup measure is count, count(column) or "
            f"sum(column){refused}, e.g. {_EXAMPLE}"
        )
    return function, argument.name


def _numeric(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_decimal(data_type)
    )


def _measure_type(measure: Measure, base_types: Mapping[str, pa.DataType]) -> str:
    if measure.function == "count" or measure.column is None:
        return "BIGINT"
    data_type = base_types[measure.column]
    if pa.types.is_integer(data_type):
        return "BIGINT"
    if pa.types.is_decimal(data_type):
        return f"DECIMAL(38, {data_type.scale})"
    return "DOUBLE"


def _totals_call(by: Sequence[str] | str, measures: Mapping[str, Any]) -> str:
    """The ``views.totals`` call answering a rollup's groups and sums when read, as a refusal
    shows it (the measures as given, before they are checked)."""
    by_columns = [by] if isinstance(by, str) else list(by)
    sums = [
        found.group(1)
        for measure in measures.values()
        if isinstance(measure, str)
        and (found := re.fullmatch(r"\s*sum\s*\(\s*(.+?)\s*\)\s*", measure, re.IGNORECASE))
    ]
    return f"views.totals(table, by={by_columns!r}, count=True" + (
        f", sum={sums!r})" if sums else ")"
    )


def create_rollup(
    base: Table,
    name: str,
    by: Sequence[str] | str,
    measures: Mapping[str, Any],
    *,
    auto_refresh: bool = False,
) -> Rollup:
    """Create the rollup table ``name`` of ``base`` and fill it (see Table.create_rollup)."""
    state = base.handle.latest_state()
    if not load_policy(state.config.policy, state.schema, state.config).signs_consistent:
        raise InvalidArgumentError(
            f"table {base.name!r} has the {state.config.policy['name']!r} policy: rollups follow "
            "tables whose delete marks cancel insertions exactly (collapsing or custom), and its "
            "totals are not the signed sum of its entries. Total it when read instead, "
            f"{_totals_call(by, measures)} (docs/views.md, section 3 'totals'), or write "
            "its rows to a collapsing table and roll that up"
        )
    by_columns = column_names(by, "by")
    if not by_columns:
        raise InvalidArgumentError("a rollup needs by: one or more column names to group by")
    base_types = {n: state.schema.type_of(n) for n in state.schema.names}
    for column in by_columns:
        if column not in base_types:
            raise UnknownColumnError(
                f"by column {column!r} is not a column of {base.name!r} "
                f"(columns: {list(base_types)})"
            )
    if not isinstance(auto_refresh, bool):
        raise InvalidArgumentError("auto_refresh must be True or False")
    parsed = parse_measures(measures, base_types, by_columns)
    definition = RollupDefinition(base.name, state.config.table_uuid, tuple(by_columns), parsed)
    schema = {c: arrow_to_sql(base_types[c]) for c in by_columns}
    schema.update({m.name: _measure_type(m, base_types) for m in parsed})
    created = lifecycle.create_table(
        base.store,
        name,
        schema,
        primary_key=by_columns,
        policy=policy_spec({m.name: m.function for m in parsed}),
        rollup_of=definition.to_json(),
    )
    rollup = Rollup(_table_like(base, name, created), base, definition)
    try:
        rollup.refresh()
        if auto_refresh:
            _set_auto_refresh(base, name)
    except BaseException:
        _discard_created(base.store, name, first_life=created.version == 0)
        raise
    return rollup


def _discard_created(store: Store, name: str, first_life: bool) -> None:
    """Leave nothing usable of a rollup whose creation failed: it is dropped with its data files
    (so nobody who opened it meanwhile commits to it, and the name is free for the next try).

    Its log stays, as every dropped table's does: once dropped, the name is free, and another
    writer may at once create a new table under it, whose log continues this one's. For the
    same reason the data files deleted besides the dropped state's (files of a commit whose
    outcome a failed storage call left unknown) are those listed before the drop, while the
    name still held only this table. Best effort: the original error is what the caller sees."""
    data_prefix = lifecycle.table_log(store, name).prefix + "_data/"
    leftovers: list[str] = []
    if first_life:
        with contextlib.suppress(OSError):
            leftovers = [info.key for info in store.list(data_prefix)]
    for _ in range(2):  # one failed storage call must not leave the table alive
        try:
            lifecycle.drop_table(store, name, purge=True)
            break
        except TableNotFoundError:
            break
        except (LedgerError, OSError) as e:
            log.warning("rollup %r: could not drop it after its creation failed: %s", name, e)
    else:
        return  # still alive: its files are its own
    for key in leftovers:
        try:
            store.delete(key)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning(
                "rollup %r: could not delete %s after its creation failed: %s", name, key, e
            )


def open_rollup(table: Table, base: Table | None = None) -> Rollup:
    """The rollup a rollup table holds (its base opened from the same warehouse)."""
    definition_json = table.handle.latest_state().config.rollup
    if definition_json is None:
        raise InvalidArgumentError(f"table {table.name!r} is not a rollup")
    definition = RollupDefinition.from_json(definition_json)
    if base is None:
        base_state = lifecycle.load_table(table.store, definition.base)
        base = _table_like(table, definition.base, base_state)
    if base.handle.latest_state().config.table_uuid != definition.base_uuid:
        raise InvalidArgumentError(
            f"rollup {table.name!r} followed an earlier table named {definition.base!r}, which "
            "was dropped; create the rollup again"
        )
    return Rollup(table, base, definition)


def _table_like(table: Table, name: str, state: TableState) -> Table:
    """Table ``name`` in ``table``'s store, at ``state``. The class is taken from ``table``:
    tables build on this module (``Table.create_rollup``), so it does not import theirs."""
    return type(table)(table.store, name, state)


def _set_auto_refresh(base: Table, name: str) -> None:
    """Record in the base's config that writes refresh rollup ``name`` (a log-only commit)."""

    def build(latest: TableState) -> LogFile | None:
        if name in latest.config.auto_refresh:
            return None
        config = replace(latest.config, auto_refresh=(*latest.config.auto_refresh, name))
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=next_timestamp(latest),
            operation="set_auto_refresh",
            schema=latest.schema,
            config=config,
        )

    base.handle.commit(build)


@hooks.after_commit
def refresh_after_write(base: Table) -> None:
    """Refresh the rollups the base's config names, after every committed write to the base;
    a failure is logged, never raised (the base write has committed, and the next refresh
    catches up exactly once)."""
    names = base.handle.state.config.auto_refresh
    for name in names:
        try:
            rollup_table = _table_like(base, name, lifecycle.load_table(base.store, name))
            open_rollup(rollup_table, base).refresh()
        except (LedgerError, OSError) as e:
            log.warning("rollup %r of %r was not refreshed: %s", name, base.name, e)
