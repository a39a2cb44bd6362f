"""Sign-weighted totals as a tree: COUNT, SUM and AVG per group, equal to the same aggregates
over the visible rows, computed from the raw ledger."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ledger.arguments import closest_names
from ledger.errors import InvalidArgumentError, UnknownColumnError
from ledger.schema import arrow_to_sql_or_str
from ledger.sql.decimals import decimal_average, decimal_types
from ledger.sql.dialects import Dialect
from ledger.sql.names import (
    DML_TYPE,
    PART_COUNT,
    PART_NAN,
    PART_NEGATIVE_INF,
    PART_POSITIVE_INF,
    PART_PRESENT,
    PART_SUM,
)
from ledger.sql.predicates import parse_predicate
from ledger.sql.spec import TableSpec
from ledger.sql.trees import (
    Sources,
    alias,
    col,
    cols,
    dml,
    number,
    relation,
    weighted_by_sign,
    with_ctes,
)
from ledger.sql.visible import deduplicated, visible
from merge_policies.base import SIGNED


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
                f"totals: {column!r} is not a column of the table"
                f"{closest_names(column, list(spec.columns))} (columns: {list(spec.columns)})"
            )
    for column in (*sums_, *avgs_):
        if not _is_numeric(spec, column):
            raise InvalidArgumentError(
                f"totals: cannot sum or average {column!r} "
                f"({arrow_to_sql_or_str(spec.type_of(column))}); choose "
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
    return TotalsRequest(by_, sums_, count, avgs_, parse_predicate(spec, where))


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


def totals(
    spec: TableSpec,
    dialect: Dialect,
    sources: Sources,
    request: TotalsRequest,
    *,
    non_finite_marks: Collection[str] | None = None,
    weighted: bool = True,
    signs_grouped: bool = False,
    null_free: frozenset[str] = frozenset(),
    unwidened: frozenset[str] = frozenset(),
) -> exp.Query:
    """SUM, COUNT and AVG per group, equal to the same aggregates over the visible rows.

    Tables whose visible rows are signed (collapsing, dedup and custom) weight every entry by
    its ``dml_type`` (a delete mark carries the values it cancels): COUNT = sum(dml_type),
    SUM = sum(dml_type * x), AVG = SUM / sum(dml_type * (x IS NOT NULL)); a SUM over no
    visible non-NULL value is NULL, as in SQL. Replacing and aggregating tables keep no
    cancelling marks (a replacement needs none), so their totals aggregate the visible rows.

    A FLOAT/DOUBLE measure whose delete marks may hold NaN or an infinity (all of them unless
    ``non_finite_marks`` names those that do) is summed over its finite values, with its NaN
    and infinities counted apart: such a value never cancels by subtraction. Where no mark holds
    one, the plain weighted sum is already exact (an uncancelled NaN or infinity gives the sum
    SQL gives).

    ``weighted=False`` says that ``sources.entries`` holds no delete mark (every file holds
    insertions only, as after a full merge): its entries are then summed as they are, the
    clean query with nothing added but the step combining partial sums.

    ``signs_grouped=True`` sums the signed entries as they are, grouped by ``dml_type`` as well
    (plain sums and counts per group and sign, the clean query's work), and weighs only those
    partial rows by their sign in the combining step: the same answer (sums are linear)
    without a product per entry or integers widened per entry.

    What the files' statistics prove makes the work per entry lighter, with the same answer:
    a column of ``null_free`` (no entry read holds NULL in it) counts its non-NULL values as
    the count itself, with no test per entry; an integer column of ``unwidened`` (no delete
    mark holds its type's smallest value, so ``dml_type * x`` fits the type, and the engine
    sums the type exactly in a wider accumulator, as DuckDB's ``HUGEINT`` sum does) is weighed
    in its own type rather than widened first.
    """
    wide = exp.DataType.build(dialect.order_type, dialect=dialect.name)
    scales = decimal_types(spec)
    if spec.policy.visible_rows != SIGNED:
        rows = visible(spec, dialect, Sources(entries=sources.entries))
        return _plain_totals(exp.paren(rows, copy=False), request, scales, wide, dialect.name)
    ctes: list[tuple[str, exp.Query]] = []
    if not weighted:
        part = _partial_totals(
            relation(sources.entries), request, weighted=False, null_free=null_free
        )
        return _combine_partials(
            exp.paren(part, copy=False), request, frozenset(), scales, wide, dialect.name
        )
    entries = deduplicated(spec, sources.entries, ctes)
    widened = frozenset(
        c for c in spec.columns if pa.types.is_integer(spec.type_of(c)) and c not in unwidened
    )
    floats = frozenset(
        c
        for c in spec.columns
        if pa.types.is_floating(spec.type_of(c))
        and (non_finite_marks is None or c in non_finite_marks)
    )
    # Spark's product of dml_type and a DECIMAL of more than 34 digits drops digits of its
    # scale (the product's type would need p + 4 digits): such columns are negated instead.
    negated = frozenset(c for c, (precision, _) in scales.items() if precision > 34)
    if signs_grouped:
        parts = [_signed_partial_totals(relation(entries), request, floats, null_free, sign=None)]
        if sources.insertions is not None:
            parts.append(
                _signed_partial_totals(
                    relation(sources.insertions), request, floats, null_free, sign=1
                )
            )
    else:
        parts = [
            _partial_totals(
                relation(entries),
                request,
                weighted=True,
                wide=wide,
                integers=widened,
                floats=floats,
                negated=negated,
                null_free=null_free,
            )
        ]
        if sources.insertions is not None:
            parts.append(
                _partial_totals(
                    relation(sources.insertions),
                    request,
                    weighted=False,
                    floats=floats,
                    null_free=null_free,
                )
            )
    if len(parts) == 1 and not signs_grouped:
        # One aggregate weighing every entry: the answer is computed in it directly.
        final = _combine_partials(
            parts[0], request, floats, scales, wide, dialect.name, one_level=True
        )
        return with_ctes(final, ctes)
    combined: exp.Query = parts[0]
    for part in parts[1:]:
        combined = exp.union(combined, part, distinct=False)
    combined_totals = _combine_partials(
        exp.paren(combined, copy=False),
        request,
        floats,
        scales,
        wide,
        dialect.name,
        signed=signs_grouped,
    )
    return with_ctes(combined_totals, ctes)


def _signed_partial_totals(
    entries: exp.Expr,
    request: TotalsRequest,
    floats: frozenset[str],
    null_free: frozenset[str],
    sign: int | None,
) -> exp.Select:
    """The unweighted partial totals of ``entries`` per group and sign: ``dml_type`` is a
    grouping column (``sign=None``), or the constant ``sign`` for files holding entries of one
    sign only (insertions), which need no grouping by it."""
    query = _partial_totals(entries, request, weighted=False, floats=floats, null_free=null_free)
    by = len(request.by)
    if sign is None:
        query.set("expressions", [*query.expressions[:by], dml(), *query.expressions[by:]])
        return query.group_by(dml())
    constant = alias(exp.cast(number(sign), "TINYINT"), DML_TYPE)
    query.set("expressions", [*query.expressions[:by], constant, *query.expressions[by:]])
    return query


def _measured(request: TotalsRequest) -> list[str]:
    return list(dict.fromkeys([*request.sums, *request.avgs]))


def _finite(column: str) -> exp.Expr:
    """Whether a FLOAT/DOUBLE value is finite: x - x = 0 fails for NaN and both infinities."""
    return exp.EQ(this=exp.Sub(this=col(column), expression=col(column)), expression=number(0))


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
    negated: frozenset[str] = frozenset(),
    null_free: frozenset[str] = frozenset(),
) -> exp.Select:
    """Per group: the count, and per measured column its sum and its count of non-NULLs, each
    weighted by dml_type (or not, over files of insertions only). A FLOAT or DOUBLE column's
    sum takes its finite values only; its NaN, +inf and -inf values are counted apart."""
    one: exp.Expr = dml() if weighted else number(1)

    def weigh(value: exp.Expr) -> exp.Expr:
        return weighted_by_sign(value) if weighted else value

    def counted(condition: exp.Expr) -> exp.Expr:
        return exp.Sum(this=exp.If(this=condition, true=one.copy(), false=number(0)))

    # Plain aggregates where they are exact: CASE expressions per entry cost more than the
    # sums themselves. Over insertions only, COUNT(*) and COUNT(x) are the counts; over signed
    # entries, the sign sum of the entries whose value is not NULL is a FILTER. Either gives 0
    # where the CASE form gave NULL (no row at all), which the combining step reads alike.
    count_all: exp.Expr = exp.Sum(this=one) if weighted else exp.Count(this=exp.Star())
    selected: list[exp.Expr] = [*cols(request.by), alias(count_all, PART_COUNT)]
    for i, column in enumerate(_measured(request)):
        value: exp.Expr = col(column)
        if weighted and wide is not None and column in integers:
            # -1 * the smallest integer overflows its type: weigh integers in a wide one.
            value = exp.cast(value, wide)
        if column in floats:
            value = exp.If(this=_finite(column), true=value, false=exp.Null())
        # A column without NULL counts its values as the count: no test per entry.
        present = count_all.copy() if column in null_free else _present(column, weighted)
        selected += [
            alias(
                exp.Sum(
                    this=_negated_marks(value) if column in negated and weighted else weigh(value)
                ),
                f"{PART_SUM}{i}",
            ),
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
                .when(_finite(column), number(0))
                .when(positive.copy(), number(0))
                .when(negative.copy(), number(0))
                .when(exp.Is(this=col(column), expression=exp.Null()), number(0))
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


def _negated_marks(value: exp.Expr) -> exp.Expr:
    """``value`` negated in a delete mark, in the value's own type."""
    mark = exp.LT(this=dml(), expression=number(0))
    return exp.If(this=mark, true=exp.Neg(this=exp.paren(value.copy(), copy=False)), false=value)


def _present(column: str, weighted: bool) -> exp.Expr:
    """The (sign-weighted) count of entries whose ``column`` is not NULL."""
    if not weighted:
        return exp.Count(this=col(column))
    not_null = exp.Not(this=exp.Is(this=col(column), expression=exp.Null()))
    return exp.Filter(this=exp.Sum(this=dml()), expression=exp.Where(this=not_null))


def _combine_partials(
    partials: exp.Expr,
    request: TotalsRequest,
    floats: frozenset[str] = frozenset(),
    scales: dict[str, tuple[int, int]] | None = None,
    wide: exp.DataType | None = None,
    dialect: str = "duckdb",
    *,
    signed: bool = False,
    one_level: bool = False,
) -> exp.Select:
    """The answer from partial totals; ``signed`` partial rows carry their entries' sign in
    ``dml_type`` and count with it (each partial value negated in the rows of delete marks, in
    its own type: no product that could widen or overflow it). With ``one_level``,
    ``partials`` is the one partial aggregate itself, whose aggregates are combined in place:
    no second aggregate over its rows (a shorter statement, bound faster)."""
    one_aggregate = partials if one_level and isinstance(partials, exp.Select) else None
    aggregates: dict[str, exp.Expr] = {
        e.alias: e.this
        for e in (one_aggregate.expressions if one_aggregate is not None else [])
        if isinstance(e, exp.Alias)
    }

    def combined(name: str) -> exp.Expr:
        if one_aggregate is not None:
            return aggregates[name].copy()
        return exp.Sum(this=_negated_marks(col(name)) if signed else col(name))

    # With ``by`` every group holds at least one row, so its sums are never NULL and need no
    # COALESCE; without it, an empty table's one row sums to NULL.
    count: exp.Expr = combined(PART_COUNT)
    if not request.by:
        count = exp.Coalesce(this=count, expressions=[number(0)])
    selected: list[exp.Expr] = cols(request.by)
    if request.count:
        selected.append(alias(exp.cast(count.copy(), "BIGINT"), "count"))
    index = {c: i for i, c in enumerate(_measured(request))}

    def total(column: str) -> exp.Expr:
        """The sum of the visible values: for FLOAT/DOUBLE columns NaN if a visible value is
        NaN or both infinities are visible, else the visible infinity, else the finite sum."""
        i = index[column]
        summed: exp.Expr = combined(f"{PART_SUM}{i}")
        if column not in floats:
            return summed

        def visible(name: str) -> exp.Expr:
            return exp.GT(this=combined(f"{name}{i}"), expression=number(0))

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

    def counted_as_rows(column: str) -> bool:
        """Whether ``column``'s count of non-NULL values is the count of rows (its partial
        count is the count's own sum: no entry holds NULL in it) in a group that the HAVING
        below keeps only when that count is not 0: its sum is then never NULL and its average
        never divides by 0, and the tests saying so are left out of the statement."""
        i = index[column]
        return bool(request.by) and combined(f"{PART_PRESENT}{i}") == combined(PART_COUNT)

    for column in request.sums:
        i = index[column]
        if counted_as_rows(column):
            selected.append(alias(total(column), f"sum_{column}"))
            continue
        present = exp.Coalesce(this=combined(f"{PART_PRESENT}{i}"), expressions=[number(0)])
        selected.append(
            alias(
                exp.If(
                    this=exp.EQ(this=present, expression=number(0)),
                    true=exp.Null(),
                    false=total(column),
                ),
                f"sum_{column}",
            )
        )
    for column in request.avgs:
        i = index[column]
        present_values = combined(f"{PART_PRESENT}{i}")
        if scales and wide is not None and column in scales:
            precision, scale = scales[column]
            average = decimal_average(
                total(column), present_values, scale, wide, precision=precision, dialect=dialect
            )
        else:
            denominator: exp.Expr = present_values
            if not counted_as_rows(column):
                denominator = exp.Nullif(this=present_values, expression=number(0))
            average = exp.Div(this=exp.cast(total(column), "DOUBLE"), expression=denominator)
        selected.append(alias(average, f"avg_{column}"))
    if one_aggregate is not None:
        query = one_aggregate.copy()  # its FROM, WHERE and GROUP BY; its columns replaced
        query.set("expressions", selected)
    else:
        query = exp.select(*selected).from_(partials)
        if request.by:
            query = query.group_by(*cols(request.by))
    if request.by:
        # A group whose entries cancel out holds no visible row.
        query = query.having(exp.NEQ(this=count.copy(), expression=number(0)))
    return query


def _plain_totals(
    rows: exp.Expr,
    request: TotalsRequest,
    scales: dict[str, tuple[int, int]],
    wide: exp.DataType,
    dialect: str,
) -> exp.Select:
    selected: list[exp.Expr] = cols(request.by)
    if request.count:
        selected.append(alias(exp.cast(exp.Count(this=exp.Star()), "BIGINT"), "count"))
    selected += [alias(exp.Sum(this=col(c)), f"sum_{c}") for c in request.sums]
    for column in request.avgs:
        if column in scales:
            present = exp.Count(this=col(column))
            precision, scale = scales[column]
            average = decimal_average(
                exp.Sum(this=col(column)),
                present,
                scale,
                wide,
                precision=precision,
                dialect=dialect,
            )
        else:
            average = exp.Avg(this=exp.cast(col(column), "DOUBLE"))
        selected.append(alias(average, f"avg_{column}"))
    query = exp.select(*selected).from_(rows)
    if request.where is not None:
        query = query.where(request.where.copy())
    if request.by:
        query = query.group_by(*cols(request.by))
    return query


def non_finite_marks_probe(entries: str, measured: Sequence[str]) -> exp.Select:
    """One row: per measured FLOAT/DOUBLE column, 1 if a delete mark of ``entries`` holds NaN
    or an infinity, else 0 (only those columns need the exact form of :func:`totals`)."""
    # Positive tests in a CASE only: DuckDB folds isnan() and NOT through Parquet statistics.
    probes = [
        exp.Max(
            this=exp.Case()
            .when(exp.EQ(this=dml(), expression=number(1)), number(0))
            .when(_finite(column), number(0))
            .when(exp.Is(this=col(column), expression=exp.Null()), number(0))
            .else_(number(1))
        )
        for column in measured
    ]
    return exp.select(*probes).from_(relation(entries))


def measured_floats(spec: TableSpec, request: TotalsRequest) -> list[str]:
    """The FLOAT/DOUBLE columns a request sums or averages over signed entries (those whose
    marks may hold values that never cancel)."""
    if spec.policy.visible_rows != SIGNED:
        return []
    return [c for c in _measured(request) if pa.types.is_floating(spec.type_of(c))]
