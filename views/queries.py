"""The views as SQL trees (sqlglot), from a table's spec, rendered in any dialect.

Every query reads the raw ledger from one relation (``entries``: the data files' columns, system
columns included) and, where the engine knows more from the log, from a second one:

* ``visible`` may also read ``isolated``: entries of files whose keys are unique, hold no delete
  mark and occur in no other file (a fully merged table), whose rows are visible as they are.
* ``totals`` may also read ``insertions``: entries of files holding no delete mark, which sum
  without weighting. Sums are linear, so splitting the files changes nothing but the cost.

Identifiers are always quoted, so any column name works in any dialect.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from sqlglot import exp

from ledger.errors import InvalidArgumentError, InvalidPredicateError, UnknownColumnError
from ledger.predicates import predicate_tree
from ledger.schema import DML_TYPE, ROW_ID, TRX_ID, TRX_SEQ
from views.dialects import Dialect
from views.spec import TableSpec

ORDER_SHIFT = 4294967296  # trx_seq fits in 32 bits: order = trx_id * 2**32 + trx_seq
NET = "__ledger_net"
ORDER = "__ledger_order"
CROWDED = "__ledger_crowded_keys"
KEYED = "__ledger_keyed"  # entries with the number of entries of their key (window dialects)
ENTRIES_OF_KEY = "__ledger_entries_of_key"
LIVE = "__ledger_live"
RANK = "__ledger_rank"
ROW_NUMBER = "__ledger_row"
DEDUPED = "__ledger_deduped"
# Columns of the partial totals (user columns cannot start with "__ledger": ledger.schema).
PART_COUNT = "__ledger_count"
PART_SUM = "__ledger_sum_"
PART_PRESENT = "__ledger_present_"
# Per FLOAT/DOUBLE measure, the net number of NaN, +inf and -inf values: a weighted sum of
# non-finite values never cancels (NaN - NaN is NaN), so they are counted, not summed.
PART_NAN = "__ledger_nan_"
PART_POSITIVE_INF = "__ledger_pinf_"
PART_NEGATIVE_INF = "__ledger_ninf_"

# The change feed's own columns (Delta Lake's change data feed names).
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference."""
    return exp.column(name, table=table, quoted=True)


def cols(names: Sequence[str]) -> list[exp.Expr]:
    return [col(n) for n in names]


def alias(expression: exp.Expr, name: str) -> exp.Expr:
    return exp.alias_(expression, name, quoted=True)


def relation(name: str) -> exp.Table:
    """A quoted relation name (a view or table registered under ``name``)."""
    return exp.Table(this=exp.to_identifier(name, quoted=True))


def _int(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def _dml() -> exp.Column:
    return col(DML_TYPE)


def _weighted(expression: exp.Expr) -> exp.Expr:
    return exp.Mul(this=_dml(), expression=exp.paren(expression, copy=False))


def entry_order(dialect: Dialect) -> exp.Expr:
    """``trx_id`` and ``trx_seq`` as one number that orders entries as the ledger does."""
    as_wide = exp.cast(col(TRX_ID), exp.DataType.build(dialect.order_type, dialect=dialect.name))
    return exp.Add(
        this=exp.Mul(this=as_wide, expression=_int(ORDER_SHIFT)), expression=col(TRX_SEQ)
    )


def _latest_first(spec: TableSpec) -> list[exp.Ordered]:
    order = [
        exp.Ordered(this=col(TRX_ID), desc=True, nulls_first=False),
        exp.Ordered(this=col(TRX_SEQ), desc=True, nulls_first=False),
    ]
    version_column = spec.option("version_column")
    if version_column is not None:
        order.insert(0, exp.Ordered(this=col(version_column), desc=True, nulls_first=False))
    return order


def _first_per(query: exp.Select, partition: Sequence[str], order: list[exp.Ordered]) -> exp.Select:
    """``query`` keeping the first row of each ``partition`` group by ``order``."""
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=cols(partition),
        order=exp.Order(expressions=order),
    )
    return query.qualify(exp.EQ(this=window, expression=_int(1)))


@dataclass(frozen=True)
class Sources:
    """The relations a query reads (see the module docstring)."""

    entries: str = "entries"
    isolated: str | None = None
    insertions: str | None = None


# --- visible rows ---------------------------------------------------------------------------------


def visible(
    spec: TableSpec, dialect: Dialect, sources: Sources, *, system_columns: bool = False
) -> exp.Query:
    """The latest visible row of every key (see docs/views.md for each policy's meaning)."""
    ctes: list[tuple[str, exp.Query]] = []
    name = spec.policy.name
    if name == "aggregating":
        return _rollup_rows(spec, sources.entries)
    if name == "replacing":
        query = _replacing_rows(spec, sources.entries, system_columns)
    else:
        entries = sources.entries
        if name == "dedup":
            ctes.append((DEDUPED, _without_repeats(spec, sources.entries)))
            entries = DEDUPED
        query = _live_rows(spec, dialect, entries, system_columns, ctes)
    if sources.isolated is not None:
        shown = _shown_columns(spec, system_columns)
        as_they_are = exp.select(*cols(shown)).from_(relation(sources.isolated))
        query = exp.union(as_they_are, query, distinct=False)
    return with_ctes(query, ctes)


def with_ctes(query: exp.Query, ctes: list[tuple[str, exp.Query]]) -> exp.Query:
    """``query`` with its common table expressions, at the top where every dialect takes them."""
    if not ctes:
        return query
    out = exp.select("*").from_(exp.paren(query, copy=False))
    for name, cte in ctes:
        out = out.with_(exp.to_identifier(name, quoted=True), as_=cte)
    return out


def _shown_columns(spec: TableSpec, system_columns: bool) -> list[str]:
    if not system_columns:
        return list(spec.columns)
    return [*spec.value_columns, TRX_ID, TRX_SEQ]


def _without_repeats(spec: TableSpec, entries: str) -> exp.Select:
    """Dedup tables: the earliest of each group of repeated entries."""
    repeat = spec.policy.repeat_partition(spec.key_columns)  # type: ignore[attr-defined]
    order = [
        exp.Ordered(this=col(TRX_ID), nulls_first=False),
        exp.Ordered(this=col(TRX_SEQ), nulls_first=False),
    ]
    return _first_per(exp.select("*").from_(relation(entries)), repeat, order)


def _live_rows(
    spec: TableSpec,
    dialect: Dialect,
    entries_name: str,
    system_columns: bool,
    ctes: list[tuple[str, exp.Query]],
) -> exp.Query:
    """Collapsing semantics. Keys with a single entry are visible when it is an insertion; the
    entries of crowded keys (more than one entry) cancel per value tuple by sign, and the live
    tuple inserted last is the key's row (ledger.live explains why per tuple)."""
    entries = relation(entries_name)
    keys = list(spec.key_columns)
    values = list(spec.value_columns)
    shown = _shown_columns(spec, system_columns)
    is_insertion = exp.EQ(this=_dml(), expression=_int(1))

    def using() -> list[int | str | exp.Expr]:
        return [exp.to_identifier(k, quoted=True) for k in keys]

    if dialect.crowded_by_window:
        count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=cols(keys))
        keyed = exp.select("*", alias(count, ENTRIES_OF_KEY)).from_(entries.copy())
        ctes.append((KEYED, keyed))
        alone = exp.EQ(this=col(ENTRIES_OF_KEY), expression=_int(1))
        singles = (
            exp.select(*cols(shown)).from_(relation(KEYED)).where(exp.and_(alone, is_insertion))
        )
        crowded_entries = (
            exp.select("*")
            .from_(relation(KEYED))
            .where(exp.GT(this=col(ENTRIES_OF_KEY), expression=_int(1)))
        )
    else:
        crowded = (
            exp.select(*cols(keys))
            .from_(entries.copy())
            .group_by(*cols(keys))
            .having(exp.GT(this=exp.Count(this=exp.Star()), expression=_int(1)))
        )
        ctes.append((CROWDED, crowded))
        singles = (
            exp.select(*cols(shown))
            .from_(entries.copy())
            .join(relation(CROWDED), using=using(), join_type="anti")
            .where(is_insertion)
        )
        crowded_entries = None
    order = exp.Max(this=exp.Case().when(is_insertion.copy(), entry_order(dialect)))
    zero_signs = _negative_zero_flags(spec, values)
    live = exp.select(
        *cols(values),
        *(alias(flag, name) for _, name, flag in zero_signs),
        alias(exp.Sum(this=_dml()), NET),
        alias(order, ORDER),
    )
    if crowded_entries is not None:
        live = live.from_(exp.paren(crowded_entries, copy=False))
    else:
        live = live.from_(entries.copy()).join(relation(CROWDED), using=using(), join_type="semi")
    live = live.group_by(*cols(values), *(flag.copy() for _, _, flag in zero_signs)).having(
        exp.GT(this=exp.Sum(this=_dml()), expression=_int(0))
    )
    picked: list[exp.Expr] = cols(shown[: len(values)] if system_columns else shown)
    # Engines may pick the latest row through a sort that drops the sign of a zero (DuckDB's
    # arg_max), so the sign is put back from the flag.
    signed = {column: name for column, name, _ in zero_signs}
    picked = [
        alias(
            exp.If(this=col(signed[c.name]), true=exp.Neg(this=exp.Abs(this=c)), false=c.copy()),
            c.name,
        )
        if isinstance(c, exp.Column) and c.name in signed
        else c
        for c in picked
    ]
    if system_columns:
        shift = _int(ORDER_SHIFT)
        picked += [
            alias(exp.cast(exp.IntDiv(this=col(ORDER), expression=shift), "BIGINT"), TRX_ID),
            alias(exp.cast(exp.Mod(this=col(ORDER), expression=shift.copy()), "INT"), TRX_SEQ),
        ]
    latest = _first_per(
        exp.select(*picked).from_(relation(LIVE)),
        keys,
        [exp.Ordered(this=col(ORDER), desc=True, nulls_first=False)],
    )
    ctes.append((LIVE, live))
    return exp.union(singles, latest, distinct=False)


def _negative_zero_flags(spec: TableSpec, values: Sequence[str]) -> list[tuple[str, str, exp.Expr]]:
    """Per FLOAT/DOUBLE value: (column, flag name, whether it is -0.0; atan2 keeps the sign of
    a zero). Grouped next to the values so that -0.0 and 0.0, which SQL compares equal, stay
    apart and a visible 0.0 never comes back as -0.0 (as ledger.live does)."""
    flags: list[tuple[str, str, exp.Expr]] = []
    for column in values:
        if column in spec.columns and pa.types.is_floating(spec.type_of(column)):
            sign = exp.Anonymous(this="ATAN2", expressions=[col(column), _int(-1)])
            name = f"__ledger_negative_zero_{len(flags)}"
            flags.append(
                (
                    column,
                    name,
                    exp.paren(
                        exp.and_(
                            exp.EQ(this=col(column), expression=_int(0)),
                            exp.LT(this=sign, expression=_int(0)),
                        ),
                        copy=False,
                    ),
                )
            )
    return flags


def _replacing_rows(spec: TableSpec, entries: str, system_columns: bool) -> exp.Query:
    """Replacing semantics: the latest entry of each key, unless it is a delete mark."""
    shown = _shown_columns(spec, system_columns)
    latest = _first_per(
        exp.select(*cols(shown), col(DML_TYPE)).from_(relation(entries)),
        list(spec.key_columns),
        _latest_first(spec),
    )
    return (
        exp.select(*cols(shown))
        .from_(exp.paren(latest, copy=False))
        .where(exp.EQ(this=_dml(), expression=_int(1)))
    )


def _rollup_rows(spec: TableSpec, entries: str) -> exp.Select:
    """Aggregating semantics: one row per group key with its measures merged; a group whose
    count measure nets to zero holds no rows."""
    keys = list(spec.key_columns)
    measures = spec.policy.measures  # type: ignore[attr-defined]
    selected: list[exp.Expr] = cols(keys)
    counts = []
    for column, function, sql_type in measures:
        if function in ("sum", "count"):
            total = exp.Coalesce(this=exp.Sum(this=_weighted(col(column))), expressions=[_int(0)])
            selected.append(alias(exp.cast(total, sql_type), column))
            if function == "count":
                counts.append(column)
        else:
            selected.append(alias(exp.func(function, col(column)), column))
    query = exp.select(*selected).from_(relation(entries)).group_by(*cols(keys))
    if counts:
        total = exp.Coalesce(this=exp.Sum(this=_weighted(col(counts[0]))), expressions=[_int(0)])
        query = query.having(exp.NEQ(this=total, expression=_int(0)))
    return query


# --- totals --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TotalsRequest:
    """What :func:`totals` computes; output columns are named ``count``, ``sum_<x>``,
    ``avg_<x>``."""

    by: tuple[str, ...] = ()
    sums: tuple[str, ...] = ()
    count: bool = True
    avgs: tuple[str, ...] = ()
    where: exp.Expr | None = None

    def output_columns(self) -> list[str]:
        return [
            *self.by,
            *(["count"] if self.count else []),
            *(f"sum_{c}" for c in self.sums),
            *(f"avg_{c}" for c in self.avgs),
        ]


def check_totals_request(
    spec: TableSpec,
    dialect: Dialect,
    by: Sequence[str] | str | None,
    sums: Sequence[str] | str | None,
    count: bool,
    avgs: Sequence[str] | str | None,
    where: str | None,
) -> TotalsRequest:
    """Validate a totals request against the table: typed errors before any query runs."""
    by_, sums_, avgs_ = (_names(x, what) for x, what in ((by, "by"), (sums, "sum"), (avgs, "avg")))
    for column in (*by_, *sums_, *avgs_):
        if column not in spec.columns:
            raise UnknownColumnError(
                f"totals: {column!r} is not a column of the table (columns: {list(spec.columns)})"
            )
    for column in (*sums_, *avgs_):
        if not _is_numeric(spec, column):
            raise InvalidArgumentError(
                f"totals: cannot sum or average {column!r} ({spec.type_of(column)}); choose "
                "numeric columns"
            )
    if not isinstance(count, bool):
        raise InvalidArgumentError("totals: count must be True or False")
    if not (count or sums_ or avgs_):
        raise InvalidArgumentError("totals: ask for at least one of count, sum or avg")
    names = [*by_, *(["count"] if count else []), *(f"sum_{c}" for c in sums_)]
    names += [f"avg_{c}" for c in avgs_]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"totals: output columns {names} repeat a name")
    return TotalsRequest(by_, sums_, count, avgs_, parse_predicate(spec, dialect, where))


def _names(value: Sequence[str] | str | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"totals: {what} must be a column name or a list of them")
    return tuple(value)


def _is_numeric(spec: TableSpec, column: str) -> bool:
    data_type = spec.type_of(column)
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_decimal(data_type)
    )


def parse_predicate(spec: TableSpec, dialect: Dialect, where: str | None) -> exp.Expr | None:
    """A user's filter as a tree, checked to be one expression over the table's columns."""
    if where is None:
        return None
    if not isinstance(where, str) or not where.strip():
        raise InvalidPredicateError("where must be a non-empty SQL predicate string")
    # Predicates are written in DuckDB's SQL (as delete_where's) and rendered per dialect, so
    # one predicate means the same everywhere.
    tree = predicate_tree(where)
    forbidden = (
        exp.Query,
        exp.Command,
        exp.Create,
        exp.Drop,
        exp.Insert,
        exp.Delete,
        exp.AggFunc,
        exp.Window,
    )
    if any(isinstance(node, forbidden) for node in tree.walk()):
        raise InvalidPredicateError(
            f"predicate {where!r} must be an expression over the table's columns, not a "
            "statement, subquery, aggregate or window"
        )
    for column in tree.find_all(exp.Column):
        if column.table:
            raise InvalidPredicateError(
                f"predicate {where!r} names {column.sql()!r}: refer to the table's columns "
                "without a table name"
            )
        if column.name not in spec.columns:
            raise UnknownColumnError(
                f"predicate {where!r} names {column.name!r}, which is not a column of the "
                f"table (columns: {list(spec.columns)})"
            )
        column.this.set("quoted", True)
    return tree


def totals(
    spec: TableSpec,
    dialect: Dialect,
    sources: Sources,
    request: TotalsRequest,
    *,
    non_finite_marks: Collection[str] | None = None,
) -> exp.Query:
    """SUM, COUNT and AVG per group, equal to the same aggregates over the visible rows.

    Collapsing, dedup and custom tables weight every entry by its ``dml_type`` (a delete mark
    carries the values it cancels): COUNT = sum(dml_type), SUM = sum(dml_type * x), AVG =
    SUM / sum(dml_type * (x IS NOT NULL)); a SUM over no visible non-NULL value is NULL, as in
    SQL. Replacing and aggregating tables keep no cancelling marks (a replacement needs none),
    so their totals aggregate the visible rows.

    A FLOAT/DOUBLE measure whose delete marks may hold NaN or an infinity (all of them unless
    ``non_finite_marks`` names those that do) is summed over its finite values, with its NaN
    and infinities counted apart: such a value never cancels by subtraction. Where no mark holds
    one, the plain weighted sum is already exact (an uncancelled NaN or infinity gives the sum
    SQL gives).
    """
    wide = exp.DataType.build(dialect.order_type, dialect=dialect.name)
    scales = _decimal_scales(spec)
    if spec.policy.name in ("replacing", "aggregating"):
        rows = visible(spec, dialect, Sources(entries=sources.entries))
        return _plain_totals(exp.paren(rows, copy=False), request, scales, wide)
    ctes: list[tuple[str, exp.Query]] = []
    entries = sources.entries
    if spec.policy.name == "dedup":
        ctes.append((DEDUPED, _without_repeats(spec, sources.entries)))
        entries = DEDUPED
    integers = frozenset(c for c in spec.columns if pa.types.is_integer(spec.type_of(c)))
    floats = frozenset(
        c
        for c in spec.columns
        if pa.types.is_floating(spec.type_of(c))
        and (non_finite_marks is None or c in non_finite_marks)
    )
    parts = [
        _partial_totals(
            relation(entries), request, weighted=True, wide=wide, integers=integers, floats=floats
        )
    ]
    if sources.insertions is not None:
        parts.append(
            _partial_totals(relation(sources.insertions), request, weighted=False, floats=floats)
        )
    combined: exp.Query = parts[0]
    for part in parts[1:]:
        combined = exp.union(combined, part, distinct=False)
    combined_totals = _combine_partials(
        exp.paren(combined, copy=False), request, floats, scales, wide
    )
    return with_ctes(combined_totals, ctes)


def _decimal_scales(spec: TableSpec) -> dict[str, int]:
    """The scale of every DECIMAL column, whose average is a DECIMAL too."""
    scales = {}
    for column in spec.columns:
        data_type = spec.type_of(column)
        if pa.types.is_decimal(data_type):
            scales[column] = int(data_type.scale)
    return scales


# Digits a DECIMAL average carries beyond its column's scale (Spark's AVG adds as many).
AVERAGE_EXTRA_DIGITS = 4


def average_scale(scale: int) -> int:
    """The scale of the average of a DECIMAL column of scale ``scale``."""
    return min(scale + AVERAGE_EXTRA_DIGITS, 38)


def _decimal_average(
    total: exp.Expr, present: exp.Expr, scale: int, wide: exp.DataType
) -> exp.Expr:
    """``total / present`` as a DECIMAL of scale ``average_scale(scale)``, rounded half away
    from zero at its last digit, the same on every engine and whatever the summation order.

    Engines divide decimals differently (DuckDB in DOUBLE, Spark with its own rounding), so
    the quotient is computed by integer division: ``total`` in units of its last digit,
    divided by the count, then the extra digits from the remainder, then the rounding.
    ``present`` is the count of non-NULL values (NULL or 0 give NULL).
    """
    target = average_scale(scale)
    extra = target - scale

    def p(expression: exp.Expr) -> exp.Expr:  # sqlglot prints nested operators unbracketed
        return exp.paren(expression, copy=False)

    # A sign-weighted count is negative where a group's marks outnumber its insertions (a
    # policy whose views drop insertions, such as dedup): divide magnitudes, then sign.
    count = p(exp.Abs(this=p(exp.Nullif(this=present, expression=_int(0)))))
    units = p(exp.cast(p(exp.Mul(this=total, expression=_int(10**scale))), wide.copy()))
    magnitude = p(exp.Abs(this=units))

    def remainder(dividend: exp.Expr, quotient: exp.Expr) -> exp.Expr:
        return p(exp.Sub(this=dividend, expression=p(exp.Mul(this=quotient, expression=count))))

    whole = p(exp.cast(p(exp.IntDiv(this=magnitude, expression=count)), wide.copy()))
    rest = p(exp.Mul(this=remainder(magnitude, whole), expression=_int(10**extra)))
    digits = p(exp.IntDiv(this=rest, expression=count))
    last = remainder(rest, digits)
    round_up = exp.If(
        this=exp.GTE(this=p(exp.Mul(this=_int(2), expression=last)), expression=count),
        true=_int(1),
        false=_int(0),
    )
    scaled = p(
        exp.Add(
            this=p(
                exp.Add(this=p(exp.Mul(this=whole, expression=_int(10**extra))), expression=digits)
            ),
            expression=p(round_up),
        )
    )
    signed = exp.If(
        this=exp.NEQ(
            this=p(exp.LT(this=units, expression=_int(0))),
            expression=p(exp.LT(this=present.copy(), expression=_int(0))),
        ),
        true=exp.Neg(this=scaled),
        false=scaled,
    )
    # Units of 10**-target times that unit: the product of a DECIMAL(p, 0) and a
    # DECIMAL(target, target) is exact on both engines while p + target + 1 <= 38 (Spark
    # rounds wider products to scale 6), so the average holds 37 - 2 * target whole digits.
    unit = exp.cast(
        exp.Literal.string(f"{Decimal(1).scaleb(-target):f}"),
        exp.DataType.build(f"DECIMAL({target}, {target})"),
    )
    digits_kept = exp.DataType.build(f"DECIMAL({max(37 - target, 1)}, 0)")
    product = exp.Mul(this=p(exp.cast(p(signed), digits_kept)), expression=unit)
    return exp.cast(p(product), exp.DataType.build(f"DECIMAL(38, {target})")).copy()


def _measured(request: TotalsRequest) -> list[str]:
    return list(dict.fromkeys([*request.sums, *request.avgs]))


def _finite(column: str) -> exp.Expr:
    """Whether a FLOAT/DOUBLE value is finite: x - x = 0 fails for NaN and both infinities."""
    return exp.EQ(this=exp.Sub(this=col(column), expression=col(column)), expression=_int(0))


def _special(text: str) -> exp.Expr:
    """A DOUBLE NaN or infinity ('NaN', 'Infinity', '-Infinity'), spelled alike in each dialect."""
    return exp.cast(exp.Literal.string(text), "DOUBLE")


def _partial_totals(
    entries: exp.Expr,
    request: TotalsRequest,
    *,
    weighted: bool,
    wide: exp.DataType | None = None,
    integers: frozenset[str] = frozenset(),
    floats: frozenset[str] = frozenset(),
) -> exp.Select:
    """Per group: the count, and per measured column its sum and its count of non-NULLs, each
    weighted by dml_type (or not, over files of insertions only). A FLOAT or DOUBLE column's
    sum takes its finite values only; its NaN, +inf and -inf values are counted apart."""
    one: exp.Expr = _dml() if weighted else _int(1)

    def weigh(value: exp.Expr) -> exp.Expr:
        return _weighted(value) if weighted else value

    def counted(condition: exp.Expr) -> exp.Expr:
        return exp.Sum(this=exp.If(this=condition, true=one.copy(), false=_int(0)))

    selected: list[exp.Expr] = [*cols(request.by), alias(exp.Sum(this=one), PART_COUNT)]
    for i, column in enumerate(_measured(request)):
        value: exp.Expr = col(column)
        if weighted and wide is not None and column in integers:
            # -1 * the smallest integer overflows its type: weigh integers in a wide one.
            value = exp.cast(value, wide)
        if column in floats:
            value = exp.If(this=_finite(column), true=value, false=exp.Null())
        present = exp.Sum(
            this=exp.If(
                this=exp.Is(this=col(column), expression=exp.Null()),
                true=_int(0),
                false=one.copy(),
            )
        )
        selected += [
            alias(exp.Sum(this=weigh(value)), f"{PART_SUM}{i}"),
            alias(present, f"{PART_PRESENT}{i}"),
        ]
        if column in floats:
            # Every test is a positive condition in a CASE: DuckDB folds isnan(), NOT and
            # range comparisons by Parquet statistics, which leave NaN out (isnan(NaN) and
            # NOT (NaN - NaN = 0) were read as false).
            positive = exp.EQ(this=col(column), expression=_special("Infinity"))
            negative = exp.EQ(this=col(column), expression=_special("-Infinity"))
            nan = exp.Sum(
                this=exp.Case()
                .when(_finite(column), _int(0))
                .when(positive.copy(), _int(0))
                .when(negative.copy(), _int(0))
                .when(exp.Is(this=col(column), expression=exp.Null()), _int(0))
                .else_(one.copy())
            )
            selected += [
                alias(nan, f"{PART_NAN}{i}"),
                alias(counted(positive), f"{PART_POSITIVE_INF}{i}"),
                alias(counted(negative), f"{PART_NEGATIVE_INF}{i}"),
            ]
    query = exp.select(*selected).from_(entries.copy())
    if request.where is not None:
        query = query.where(request.where.copy())
    if request.by:
        query = query.group_by(*cols(request.by))
    return query


def _combine_partials(
    partials: exp.Expr,
    request: TotalsRequest,
    floats: frozenset[str] = frozenset(),
    scales: dict[str, int] | None = None,
    wide: exp.DataType | None = None,
) -> exp.Select:
    count = exp.Coalesce(this=exp.Sum(this=col(PART_COUNT)), expressions=[_int(0)])
    selected: list[exp.Expr] = cols(request.by)
    if request.count:
        selected.append(alias(exp.cast(count.copy(), "BIGINT"), "count"))
    index = {c: i for i, c in enumerate(_measured(request))}

    def total(column: str) -> exp.Expr:
        """The sum of the visible values: for FLOAT/DOUBLE columns NaN if a visible value is
        NaN or both infinities are visible, else the visible infinity, else the finite sum."""
        i = index[column]
        summed: exp.Expr = exp.Sum(this=col(f"{PART_SUM}{i}"))
        if column not in floats:
            return summed

        def visible(name: str) -> exp.Expr:
            return exp.GT(this=exp.Sum(this=col(f"{name}{i}")), expression=_int(0))

        return (
            exp.Case()
            .when(
                exp.or_(
                    visible(PART_NAN),
                    exp.and_(visible(PART_POSITIVE_INF), visible(PART_NEGATIVE_INF)),
                ),
                _special("NaN"),
            )
            .when(visible(PART_POSITIVE_INF), _special("Infinity"))
            .when(visible(PART_NEGATIVE_INF), _special("-Infinity"))
            .else_(summed)
        )

    for column in request.sums:
        i = index[column]
        present = exp.Coalesce(this=exp.Sum(this=col(f"{PART_PRESENT}{i}")), expressions=[_int(0)])
        selected.append(
            alias(
                exp.If(
                    this=exp.EQ(this=present, expression=_int(0)),
                    true=exp.Null(),
                    false=total(column),
                ),
                f"sum_{column}",
            )
        )
    for column in request.avgs:
        i = index[column]
        present_values = exp.Sum(this=col(f"{PART_PRESENT}{i}"))
        if scales and wide is not None and column in scales:
            average = _decimal_average(total(column), present_values, scales[column], wide)
        else:
            denominator = exp.Nullif(this=present_values, expression=_int(0))
            average = exp.Div(this=exp.cast(total(column), "DOUBLE"), expression=denominator)
        selected.append(alias(average, f"avg_{column}"))
    query = exp.select(*selected).from_(partials)
    if request.by:
        # A group whose entries cancel out holds no visible row.
        query = query.group_by(*cols(request.by)).having(
            exp.NEQ(this=count.copy(), expression=_int(0))
        )
    return query


def _plain_totals(
    rows: exp.Expr, request: TotalsRequest, scales: dict[str, int], wide: exp.DataType
) -> exp.Select:
    selected: list[exp.Expr] = cols(request.by)
    if request.count:
        selected.append(alias(exp.cast(exp.Count(this=exp.Star()), "BIGINT"), "count"))
    selected += [alias(exp.Sum(this=col(c)), f"sum_{c}") for c in request.sums]
    for column in request.avgs:
        if column in scales:
            present = exp.Count(this=col(column))
            average = _decimal_average(exp.Sum(this=col(column)), present, scales[column], wide)
        else:
            average = exp.Avg(this=exp.cast(col(column), "DOUBLE"))
        selected.append(alias(average, f"avg_{column}"))
    query = exp.select(*selected).from_(rows)
    if request.where is not None:
        query = query.where(request.where.copy())
    if request.by:
        query = query.group_by(*cols(request.by))
    return query


# --- history and changes -------------------------------------------------------------------------


def history(spec: TableSpec, entries: str, keys: str, commits: str) -> exp.Select:
    """Every entry of the keys in ``keys``, oldest first, with its commit's version and time
    from ``commits`` (``trx_id``, ``_commit_version``, ``_commit_timestamp``)."""
    key_ids: list[int | str | exp.Expr] = [
        exp.to_identifier(k, quoted=True) for k in spec.key_columns
    ]
    shown = [*spec.value_columns, TRX_ID, TRX_SEQ, DML_TYPE]
    return (
        exp.select(
            *(col(c, "e") for c in shown),
            col(COMMIT_VERSION, "c"),
            col(COMMIT_TIMESTAMP, "c"),
        )
        .from_(exp.alias_(relation(entries), "e", table=True))
        .join(relation(keys), using=key_ids, join_type="semi")
        .join(
            exp.alias_(relation(commits), "c", table=True),
            using=[exp.to_identifier(TRX_ID, quoted=True)],
            join_type="left",
        )
        .order_by(
            *(col(k, "e") for k in spec.key_columns),
            col(TRX_ID, "e"),
            col(TRX_SEQ, "e"),
        )
    )


def changes(spec: TableSpec, sources: Sources) -> exp.Select:
    """The change feed over ``entries`` (entries added after a version, each with
    ``_commit_version`` and ``_commit_timestamp``): insertions are ``insert`` and delete marks
    ``delete``, except that a key marked and inserted by the same commit was updated, its mark
    the ``update_preimage`` and its insertion the ``update_postimage``."""
    keys = list(spec.key_columns)
    per_commit_key = [COMMIT_VERSION, *keys]

    def signs(value: int) -> exp.Expr:
        window = exp.Window(
            this=exp.Max(
                this=exp.If(
                    this=exp.EQ(this=_dml(), expression=_int(value)), true=_int(1), false=_int(0)
                )
            ),
            partition_by=cols(per_commit_key),
        )
        return exp.EQ(this=window, expression=_int(1))

    is_insertion = exp.EQ(this=_dml(), expression=_int(1))
    updated = exp.and_(signs(1), signs(-1))
    kind = (
        exp.Case()
        .when(exp.and_(updated.copy(), is_insertion.copy()), exp.Literal.string("update_postimage"))
        .when(updated.copy(), exp.Literal.string("update_preimage"))
        .when(is_insertion.copy(), exp.Literal.string("insert"))
        .else_(exp.Literal.string("delete"))
    )
    shown = [*spec.columns, *([ROW_ID] if spec.generated_row_id else [])]
    return (
        exp.select(
            *cols(shown),
            alias(kind, CHANGE_TYPE),
            col(COMMIT_VERSION),
            col(COMMIT_TIMESTAMP),
            col(TRX_ID),
            col(TRX_SEQ),
        )
        .from_(exp.paren(_net_of_each_commit(sources.entries, shown), copy=False))
        .order_by(col(COMMIT_VERSION), col(TRX_ID), col(TRX_SEQ))
    )


def _net_of_each_commit(entries: str, shown: list[str]) -> exp.Select:
    """The entries of ``entries`` that one commit's net effect keeps: per commit and value
    tuple, entries of opposite signs cancel (a key inserted then deleted in one transaction was
    never there), and of the sign that remains the latest ones are kept."""
    tuple_of_commit = [COMMIT_VERSION, *shown]
    net = exp.Window(this=exp.Sum(this=_dml()), partition_by=cols(tuple_of_commit))
    latest_first = exp.Window(
        this=exp.RowNumber(),
        partition_by=cols([*tuple_of_commit, DML_TYPE]),
        order=exp.Order(expressions=[exp.Ordered(this=col(TRX_SEQ), desc=True)]),
    )
    ranked = exp.select("*", alias(net, NET), alias(latest_first, RANK)).from_(relation(entries))
    return (
        exp.select("*")
        .from_(exp.paren(ranked, copy=False))
        .where(
            exp.and_(
                exp.GT(this=exp.Mul(this=_dml(), expression=col(NET)), expression=_int(0)),
                exp.LTE(this=col(RANK), expression=exp.Abs(this=col(NET))),
            )
        )
    )


def render(query: exp.Expr, dialect: Dialect) -> str:
    """The SQL text of ``query`` in ``dialect``."""
    return str(query.sql(dialect=dialect.name))
