"""Insert transforms: one SELECT a table runs over the rows every write brings, before they are
checked against its schema.

A transform shapes incoming rows for the table (seed a count for an aggregating table, pull
fields out of a JSON payload, normalise text) so that no writer has to. It reads the relation
``rows``, which holds the columns the caller passed, as the caller passed them; its output must
be columns of the table, of types that convert to theirs.

>>> check_shape("select *, 1::BIGINT as cnt from rows")
'SELECT *, CAST(1 AS BIGINT) AS cnt FROM rows'

A transform works row by row: one SELECT over ``rows`` with expressions and an optional WHERE,
and no aggregate, window, GROUP BY, DISTINCT, ORDER BY, LIMIT, join or subquery. Both engines
run a write's rows in pieces (chunks of a stream, Spark partitions), so only a transform that
looks at one row at a time gives the same rows however they are cut.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from ledger.engines.duckdb.query import query_over
from ledger.engines.duckdb.session import function_kinds
from ledger.errors import InsertTransformError, InvalidArgumentError, SchemaError
from ledger.inputs import Rows, concat_rows
from ledger.log.commit import next_timestamp
from ledger.log.entries import LogFile
from ledger.log.state import TableState
from ledger.schema import (
    DML_TYPE,
    ROW_ID,
    TRX_ID,
    TRX_SEQ,
    TableSchema,
    arrow_to_sql_or_str,
    conform,
    folded_name,
)
from ledger.sql_guard import DIALECT, checked_select

if TYPE_CHECKING:
    from ledger.table import Table

log = logging.getLogger(__name__)

RELATION = "rows"
SET_OPERATION = "set_insert_transform"
WHAT = "insert transform"

# Clauses that look at more than one row, or at the order of rows.
_MULTI_ROW_CLAUSES = ("distinct", "group", "having", "qualify", "order", "limit", "offset")
# Functions that turn one row into several (DuckDB's unnest, Spark's generators).
_ROW_MULTIPLIERS = (exp.Unnest, exp.Explode, exp.Inline, exp.Stack)
_MULTIPLYING_NAMES = frozenset({"unnest", "explode", "explode_outer", "posexplode", "inline"})
# Functions whose value changes from one run to the next. A write may run its transform more than
# once over the same rows (an upsert finds the keys it replaces, then writes), so a transform must
# give the same rows each time: a random key would make the two runs disagree.
_VARYING = (exp.Rand, exp.Uuid)
_VARYING_NAMES = frozenset(
    {"random", "rand", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "setseed", "nextval",
     "currval"}
)  # fmt: skip


def check_shape(sql: object) -> str:
    """``sql`` rendered once it is a safe, row-by-row SELECT over ``rows``; else
    :class:`~ledger.errors.UnsafeSqlError` (a statement, a file or table read, a function that
    reads settings) or :class:`~ledger.errors.InsertTransformError` (not row by row)."""
    return _checked_shape(checked_select(sql, (RELATION,), WHAT))


@functools.lru_cache(maxsize=256)
def _checked_shape(rendered: str) -> str:
    tree = sqlglot.parse_one(rendered, dialect=DIALECT)
    if not isinstance(tree, exp.Select):
        raise InsertTransformError(
            f"{WHAT} {rendered!r} must be one SELECT over {RELATION!r} (no UNION, INTERSECT or "
            "EXCEPT): it is run on each piece of a write's rows"
        )
    source = tree.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        raise InsertTransformError(f"{WHAT} {rendered!r} must read FROM {RELATION}")
    for clause in _MULTI_ROW_CLAUSES:
        if tree.args.get(clause):
            raise _not_row_by_row(rendered, clause.upper())
    if tree.args.get("with_") or tree.args.get("joins") or tree.args.get("laterals"):
        raise _not_row_by_row(rendered, "a CTE, JOIN or LATERAL")
    _refuse_system_outputs(tree, rendered)
    for node in tree.walk():
        if isinstance(node, exp.TableSample):
            raise _not_row_by_row(rendered, "a sample (USING SAMPLE, TABLESAMPLE)")
        if node is not tree and isinstance(node, exp.Select | exp.Subquery | exp.SetOperation):
            raise _not_row_by_row(rendered, "a subquery")
        if isinstance(node, exp.Window):
            raise _not_row_by_row(rendered, f"a window function ({node.sql(dialect=DIALECT)})")
        if _is_aggregate(node):
            raise _not_row_by_row(rendered, f"an aggregate ({node.sql(dialect=DIALECT)})")
        if _named(node, _ROW_MULTIPLIERS, _MULTIPLYING_NAMES):
            raise InsertTransformError(
                f"{WHAT} {rendered!r} uses {node.sql(dialect=DIALECT)}, which makes several rows "
                "of one; a transform gives one row per incoming row (or none, by WHERE); read a "
                "struct's fields as payload.field"
            )
        if _named(node, _VARYING, _VARYING_NAMES):
            raise InsertTransformError(
                f"{WHAT} {rendered!r} uses {node.sql(dialect=DIALECT)}, whose value changes "
                "from one run to the next; a write may run its transform more than once over "
                "the same rows, so it must give the same rows each time"
            )
    return rendered


def _named(node: exp.Expr, kinds: tuple[type[exp.Expr], ...], names: frozenset[str]) -> bool:
    if isinstance(node, kinds):
        return True
    return isinstance(node, exp.Anonymous) and str(node.name).lower() in names


def _refuse_system_outputs(tree: exp.Select, rendered: str) -> None:
    """A transform may pass a system column through (an update by ``_row_id`` carries it) but
    never make one: a changed ``_row_id`` would make an update cancel another row."""
    system = {folded_name(name) for name in (TRX_ID, TRX_SEQ, DML_TYPE, ROW_ID)}
    made: list[exp.Expr] = []
    for expression in tree.expressions:
        if isinstance(expression, exp.Star) or isinstance(expression.unnest(), exp.Star):
            made.extend(expression.args.get("replace") or [])
        else:
            made.append(expression)
    for expression in made:
        name = folded_name(expression.alias_or_name)
        if name not in system:
            continue
        inner = expression.this if isinstance(expression, exp.Alias) else expression
        if not (isinstance(inner, exp.Column) and folded_name(inner.name) == name):
            raise InsertTransformError(
                f"{WHAT} {rendered!r} makes the system column {expression.alias_or_name!r}; "
                "a transform may pass system columns through unchanged, never compute them"
            )


def _is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.name).lower() in _duckdb_aggregates()


@functools.cache
def _duckdb_aggregates() -> frozenset[str]:
    """Names DuckDB resolves only as aggregate functions (a few share a name with a scalar
    function, which is what they are outside GROUP BY)."""
    kinds = function_kinds()
    aggregates = {name for name, kind in kinds if kind == "aggregate"}
    return frozenset(aggregates - {name for name, kind in kinds if kind in ("scalar", "macro")})


def _not_row_by_row(rendered: str, found: str) -> InsertTransformError:
    return InsertTransformError(
        f"{WHAT} {rendered!r} uses {found}, which looks at more than one row; a transform "
        f"shapes each row on its own (SELECT expressions FROM {RELATION} [WHERE condition]), "
        "because writes run it on each piece of their rows"
    )


_NEW_COLUMN_ADVICE = (
    "Declare {columns} among the table's columns, or leave them out of the transform"
)


def check_against_schema(
    sql: object, schema: TableSchema, key_columns: Iterable[str], generated_row_id: bool
) -> str:
    """The checked transform (see :func:`check_shape`) once its output conforms to ``schema``,
    run over no rows of the table's columns; else a :class:`~ledger.errors.SchemaError` saying
    which output column does not fit.

    A column the transform reads that the table lacks is a source column the writers pass (a
    JSON payload to flatten, say); it is bound here without a type, so any function takes it.
    """
    rendered = check_shape(sql)
    source = _input_shape(rendered, schema, generated_row_id)
    output = _run(rendered, source.empty_table(), _unbound(rendered, source))
    if ROW_ID in output.column_names:  # an update by _row_id passes it through
        output = output.drop_columns([ROW_ID])
    try:
        conform(output, schema, key_columns=key_columns, new_column_advice=_NEW_COLUMN_ADVICE)
    except SchemaError as e:
        raise type(e)(
            f"{WHAT} {rendered!r} does not give rows the table takes: {e}. Its output must be "
            "columns of the table (every key column among them) of types that convert to theirs"
        ) from e
    _warn_of_misspellings(rendered, source, schema)
    return rendered


def _input_shape(rendered: str, schema: TableSchema, generated_row_id: bool) -> pa.Schema:
    """The rows a writer is taken to pass: the table's columns, less those the transform makes
    itself (an alias it does not also read), plus the source columns it reads."""
    tree = sqlglot.parse_one(rendered, dialect=DIALECT)
    read = _read_columns(tree)
    made = {folded_name(e.alias) for e in tree.expressions if e.alias} - set(map(folded_name, read))
    fields = [f for f in schema.arrow() if folded_name(f.name) not in made]
    if generated_row_id:
        fields.append(pa.field(ROW_ID, pa.int64()))
    known = {folded_name(f.name) for f in fields}
    for name in read:
        if folded_name(name) not in known | made:
            known.add(folded_name(name))
            fields.append(pa.field(name, pa.null()))
    return pa.schema(fields)


def _misspelling_of(name: str, candidates: list[str]) -> list[str]:
    """The candidate ``name`` most likely misspells: close in letters and in length (a letter or
    two dropped, added or swapped), so a source column that extends a table column's name
    (``ordered_at`` beside ``orders``) is not taken for one."""
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.75)
    return [c for c in close if abs(len(c) - len(name)) <= 2][:1]


def _warn_of_misspellings(rendered: str, source: pa.Schema, schema: TableSchema) -> None:
    """Log each source column the transform reads whose name is close to a column of the table.
    A source column cannot be told from a misspelt column by its name (writers may pass any
    column), so it is not refused; the first write that lacks it fails naming it."""
    table_names = {folded_name(name): name for name in schema.names}
    for field in source:
        if folded_name(field.name) in table_names or field.name == ROW_ID:
            continue
        close = _misspelling_of(folded_name(field.name), list(table_names))
        if close:
            log.warning(
                "%s %r reads %r, which is not a column of the table (did you mean %r?): it is "
                "taken as a source column every write must pass",
                WHAT,
                rendered,
                field.name,
                table_names[close[0]],
            )


def _unbound(rendered: str, source: pa.Schema) -> Callable[[str], InsertTransformError]:
    """The error for a transform that does not run over no rows of the table's columns (a
    misspelt type, a function given arguments it does not take)."""

    def failed(reason: str) -> InsertTransformError:
        given = ", ".join(f"{f.name} {_type_label(f.type)}" for f in source)
        return InsertTransformError(
            f"{WHAT} {rendered!r} does not run over the table's columns ({given}): {reason}. "
            "Nothing was changed; fix the transform"
        )

    return failed


def _type_label(kind: pa.DataType) -> str:
    return "(a source column)" if pa.types.is_null(kind) else arrow_to_sql_or_str(kind)


def _read_columns(tree: exp.Expr) -> list[str]:
    """The names the transform reads as columns of ``rows`` (a struct field ``payload.user``
    reads ``payload``)."""
    names: list[str] = []
    for column in tree.find_all(exp.Column):
        parts = [part.name for part in column.parts]
        if len(parts) > 1 and folded_name(parts[0]) == folded_name(RELATION):
            parts = parts[1:]
        if parts:
            names.append(parts[0])
    # A star's REPLACE and EXCLUDE lists name columns the star must find in ``rows``.
    for star in tree.find_all(exp.Star):
        for listed in (*(star.args.get("replace") or ()), *(star.args.get("except") or ())):
            names.append(listed.alias_or_name)
    return names


def apply(
    sql: str,
    rows: pa.Table,
    schema: TableSchema | None = None,
    *,
    shown: str | None = None,
    hidden: Collection[str] = (),
) -> pa.Table:
    """The transform's output over ``rows``; :class:`~ledger.errors.InsertTransformError` if it
    fails on them (a cast that does not fit, a source column the rows lack). With ``schema``
    (an insert's), a column of the table the transform reads and the rows leave out is NULL to
    it, as to an upsert's new key. A failure names ``shown`` (the transform as its table has
    it, when ``sql`` is a run of it) and the columns of ``rows`` but ``hidden`` ones."""
    rendered = check_shape(sql)
    if schema is not None:
        rows, left_out = _typed_nulls(rendered, rows, schema)
        hidden = [*hidden, *left_out]
    return _run(rendered, rows, shown=shown, hidden=hidden)


def left_out_columns(sql: str, names: Iterable[str], schema: TableSchema) -> list[pa.Field]:
    """The columns of the table the transform reads that rows of columns ``names`` leave out."""
    read = _read_names(check_shape(sql))
    have = set(map(folded_name, names))
    return [f for f in schema.arrow() if folded_name(f.name) in read - have]


def _typed_nulls(
    rendered: str, rows: pa.Table, schema: TableSchema, left_out: bool = True
) -> tuple[pa.Table, list[str]]:
    """``rows`` with each column of the table the transform reads that they hold as NULL alone
    (no type: None in every dict) cast to the column's type, and with ``left_out`` each they
    leave out added as NULL of its type, so ``ts + INTERVAL 1 HOUR`` reads a NULL timestamp
    whether an insert leaves ``ts`` out or gives it as None; and the names of the added
    columns."""
    read = _read_names(rendered)
    types = {folded_name(f.name): f.type for f in schema.arrow()}
    for i, column in enumerate(rows.schema):
        kind = types.get(folded_name(column.name))
        if kind is not None and pa.types.is_null(column.type) and folded_name(column.name) in read:
            rows = rows.set_column(i, column.name, pa.nulls(rows.num_rows, kind))
    added = left_out_columns(rendered, rows.column_names, schema) if left_out else []
    for field in added:
        rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
    return rows, [field.name for field in added]


@functools.lru_cache(maxsize=256)
def _read_names(rendered: str) -> frozenset[str]:
    return frozenset(map(folded_name, _read_columns(sqlglot.parse_one(rendered, dialect=DIALECT))))


def apply_to_rows(
    sql: str, rows: Rows, *, shown: str | None = None, hidden: Collection[str] = ()
) -> Rows:
    """The transform over rows that may name different columns (a list of dicts). Rows that
    named the same columns are transformed together; to the transform a column a row did not
    name is NULL, and an output column of that name stays not given for the row (an upsert keeps
    the row's current value). Columns the transform makes under other names are given. A
    failure is named as :func:`apply` names it."""
    if not rows.given:
        return Rows(apply(sql, rows.table, shown=shown, hidden=hidden))
    partial = sorted(rows.given)
    masks = pa.table({f"m{i}": rows.given[name] for i, name in enumerate(partial)})
    shapes = masks.group_by(masks.column_names).aggregate([]).to_pylist()
    parts = []
    for shape in shapes:
        selected = pa.array([True] * rows.num_rows)
        for i in range(len(partial)):
            selected = pc.and_(selected, pc.equal(masks.column(f"m{i}"), shape[f"m{i}"]))
        shaped = apply(sql, rows.table.filter(selected), shown=shown, hidden=hidden)
        omitted = [c for i, c in enumerate(partial) if not shape[f"m{i}"]]
        parts.append(Rows(shaped.drop_columns([c for c in omitted if c in shaped.column_names])))
    return concat_rows(parts)


def apply_over_current(
    sql: str,
    rows: Rows,
    value_columns: Sequence[str],
    current_values: Callable[[pa.Table], tuple[pa.Table, pa.Array]],
    schema: TableSchema | None = None,
) -> Rows:
    """The transform over keyed rows (an upsert or update) that may leave table columns out:
    each row is transformed as it will be, its key's visible row overlaid by the columns it
    names, so a column the transform derives from one the row leaves out is derived from the
    current value (a new key has none: the columns it leaves out are NULL to the transform).

    ``current_values`` takes the transform's output over the rows as given (which holds the
    keys) and returns ``value_columns`` of each row's visible row (NULL for a new key) and
    whether the key has one, row for row. An output column named like a column a row of a key
    with a visible row left out stays not given (the row keeps its current value): the stored
    value already is the transform's output. A new key has no stored value: its row is
    transformed as an insert's, every output column given. With ``schema``, the columns no row
    names are NULL of their column's type to the first run, as to an insert.
    """
    rendered = check_shape(sql)
    if schema is not None:
        # Columns the rows leave out stay out: they hold the current values below.
        rows = Rows(_typed_nulls(rendered, rows.table, schema, left_out=False)[0], rows.given)
    made = made_columns(rendered)
    overlaid = [c for c in value_columns if folded_name(c) not in made]
    if not any(c not in rows.table.column_names or c in rows.given for c in overlaid):
        return apply_to_rows(rendered, rows)  # every row names every column it could read
    # Columns no row names are NULL to the first run, which only finds each row's key.
    absent = [c for c in overlaid if c not in rows.table.column_names]
    table = rows.table
    kinds = {} if schema is None else dict(zip(schema.names, schema.arrow().types, strict=True))
    for name in absent:
        table = table.append_column(name, pa.nulls(rows.num_rows, kinds.get(name, pa.null())))
    ordinal = unused_name("row_ordinal", table.column_names)
    ordinals = pa.array(range(rows.num_rows), pa.int64())
    numbered = Rows(table.append_column(ordinal, ordinals), rows.given)
    # A failure of this run names the transform and the columns the caller gave.
    finding = finding_keys(rendered, ordinal)
    hidden = (ordinal, *absent)
    first = apply_to_rows(finding, numbered, shown=rendered, hidden=hidden).table
    if ordinal not in first.column_names:
        raise InsertTransformError(
            f"{WHAT} {rendered!r} does not pass every column of {RELATION} through its star, so "
            "rows that leave columns out cannot be matched with their current values; give "
            "every column the transform reads in each row"
        )
    positions = first.column(ordinal)
    current, found = current_values(first.drop_columns([ordinal]))
    return apply_to_rows(rendered, _overlay(rows, positions, current, found, overlaid))


def _overlay(
    rows: Rows,
    positions: pa.ChunkedArray,
    current: pa.Table,
    found: pa.Array,
    columns: Sequence[str],
) -> Rows:
    """``rows`` at ``positions``, where each of ``columns`` a row did not name holds the
    current value. The masks say which columns the row named, and every column for a row whose
    key is new (``found`` false): an insert's row, whose output columns are all given."""
    table = rows.table.take(positions)
    given = {name: mask.take(positions) for name, mask in rows.given.items()}
    new_key = pc.invert(pc.fill_null(found, False))
    for name in columns:
        values = current.column(name).combine_chunks()
        if name not in table.column_names:
            table = table.append_column(name, values)
            given[name] = new_key
        elif name in given:
            column = table.column_names.index(name)
            named, kept = _common_type(table.column(name).combine_chunks(), values)
            table = table.set_column(column, name, pc.if_else(given[name], named, kept))
            given[name] = pc.or_(given[name], new_key)
    return Rows(table, given)


def _common_type(named: pa.Array, kept: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Both arrays in one type: the named values' (as the transform sees rows that name the
    column) when the kept values convert to it, else the table's."""
    if pa.types.is_null(named.type):
        return named.cast(kept.type), kept
    try:
        return named, kept.cast(named.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return named.cast(kept.type), kept


def finding_keys(sql: str, name: str) -> str:
    """The transform's run that finds each row's key: without its ``WHERE`` (which is decided
    on the row as it will be, not on the columns it names) and with the column ``name`` of
    ``rows`` among its outputs (a star already passes it)."""
    rendered = check_shape(sql)
    tree = sqlglot.parse_one(rendered, dialect=DIALECT)
    assert isinstance(tree, exp.Select)  # check_shape made sure
    tree = tree.copy()
    tree.set("where", None)
    if not any(_is_star(e) for e in tree.expressions):
        tree = tree.select(exp.column(name, quoted=True), copy=False)
    return str(tree.sql(dialect=DIALECT))


def _is_star(expression: exp.Expr) -> bool:
    return isinstance(expression, exp.Star) or isinstance(expression.unnest(), exp.Star)


def made_columns(sql: str) -> set[str]:
    """Folded names the transform makes without reading a column of that name."""
    tree = sqlglot.parse_one(check_shape(sql), dialect=DIALECT)
    read = set(map(folded_name, _read_columns(tree)))
    return {folded_name(e.alias) for e in tree.expressions if e.alias} - read


def unused_name(name: str, taken: Sequence[str]) -> str:
    """``name``, prefixed with underscores until no name of ``taken`` equals it (ignoring
    case)."""
    folded = set(map(folded_name, taken))
    while folded_name(name) in folded:
        name = "_" + name
    return name


def set_insert_transform(table: Table, sql: str | None) -> int:
    """Record ``sql`` (checked against the latest schema) as the table's insert transform, or
    remove it with ``None``: a log-only commit. Returns the version that holds it."""
    if sql is not None:
        check_shape(sql)  # refused before reading the log

    def build(latest: TableState) -> LogFile | None:
        config = latest.config
        if config.rollup is not None and sql is not None:
            raise InvalidArgumentError(
                f"table {table.name!r} is a rollup: its rows are computed, it takes no insert "
                "transform"
            )
        checked = (
            None
            if sql is None
            else check_against_schema(
                sql, latest.schema, config.primary_key, config.generated_row_id
            )
        )
        if checked == config.insert_transform:
            return None
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=next_timestamp(latest),
            operation=SET_OPERATION,
            schema=latest.schema,
            config=replace(config, insert_transform=checked),
        )

    state, _ = table.handle.commit(build)
    return state.version


def _run(
    rendered: str,
    rows: pa.Table,
    failed: Callable[[str], InsertTransformError] | None = None,
    *,
    shown: str | None = None,
    hidden: Collection[str] = (),
) -> pa.Table:
    named = rendered if shown is None else shown
    columns = pa.schema([f for f in rows.schema if f.name not in hidden])

    def failed_on_rows(reason: str) -> InsertTransformError:
        nested = _missing_nested(reason, columns)
        if nested is not None:
            return InsertTransformError(
                f"{WHAT} {named!r} reads {nested}. Nothing was written; give the field in "
                "every write (null where a row has none), or leave it out of the transform"
            )
        given = ", ".join(f"{f.name} {f.type}" for f in columns)
        return InsertTransformError(
            f"{WHAT} {named!r} failed on the rows written (columns: {given}): {reason}. "
            "Nothing was written; pass the columns the transform reads, in types it takes"
        )

    return query_over(rendered, RELATION, rows, failed or failed_on_rows)


# How DuckDB refuses ``column.field`` when the struct has no such field, or no such column.
_MISSING_KEY = re.compile(r'Could not find key "(.+?)" in struct')
_MISSING_STRUCT = re.compile(r'Referenced table "(.+?)" not found')


def _missing_nested(reason: str, schema: pa.Schema) -> str | None:
    """What a transform reads that the rows do not have, when DuckDB's refusal is about a
    nested field (``meta.a``): the field and the struct columns lacking it, or the column;
    None for other refusals."""
    key = _MISSING_KEY.search(reason)
    if key is not None:
        lacking = [
            f"{f.name!r} (fields {[c.name for c in f.type]})"
            for f in schema
            if pa.types.is_struct(f.type) and key[1] not in [c.name for c in f.type]
        ]
        where = " or ".join(lacking) if lacking else "a nested column"
        return f"field {key[1]!r} of column {where}, which the rows written do not have"
    struct = _MISSING_STRUCT.search(reason)
    if struct is not None and struct[1] not in schema.names:
        return (
            f"a field of column {struct[1]!r} (as {struct[1]}.field), and the rows written have "
            f"no column {struct[1]!r} (they have {schema.names})"
        )
    return None


__all__ = [
    "RELATION",
    "apply",
    "apply_over_current",
    "apply_to_rows",
    "check_against_schema",
    "check_shape",
    "finding_keys",
    "left_out_columns",
    "made_columns",
    "set_insert_transform",
    "unused_name",
]
