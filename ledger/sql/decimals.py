"""Averages of DECIMAL columns, exact and the same on every engine."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ledger.sql.spec import TableSpec
from ledger.sql.trees import number

# The widest DECIMAL both engines hold (and the precision of every DECIMAL sum).
MAX_PRECISION = 38
# Digits a DECIMAL average carries beyond its column's scale (Spark's AVG adds as many).
AVERAGE_EXTRA_DIGITS = 4
# Spark's `div` answers a BIGINT: the quotient of a 38-digit dividend is taken in two steps of
# a base that keeps each step's quotient well inside it.
_SPLIT = 10**20


def decimal_types(spec: TableSpec) -> dict[str, tuple[int, int]]:
    """The (precision, scale) of every DECIMAL column."""
    types = {}
    for column in spec.columns:
        data_type = spec.type_of(column)
        if pa.types.is_decimal(data_type):
            types[column] = (int(data_type.precision), int(data_type.scale))
    return types


def average_scale(scale: int, precision: int = MAX_PRECISION - AVERAGE_EXTRA_DIGITS) -> int:
    """The scale of the average of a DECIMAL(precision, scale) column: four digits more, or as
    many as a DECIMAL(38) holds beside every whole digit of the column (an average is never
    larger than the largest value), so no average overflows."""
    return scale + max(min(AVERAGE_EXTRA_DIGITS, MAX_PRECISION - precision), 0)


def sum_may_overflow(precision: int, rows: int) -> bool:
    """Whether a sum of ``rows`` values of a DECIMAL of ``precision`` digits may exceed the 38
    digits of the sum's type (it cannot while ``rows * 10**precision <= 10**38``)."""
    return bool(rows * 10**precision > 10**MAX_PRECISION)


def _p(expression: exp.Expr) -> exp.Expr:  # sqlglot prints nested operators unbracketed
    return exp.paren(expression, copy=False)


def _text(expression: exp.Expr) -> exp.Expr:
    return exp.cast(expression, exp.DataType.build("VARCHAR"))


def _units(total: exp.Expr, scale: int, wide: exp.DataType) -> exp.Expr:
    """The DECIMAL ``total`` in units of 10**-scale, as an integer of type ``wide``.

    The text of the DECIMAL(38, scale) with the point left out: both engines print a DECIMAL
    in plain digits with every digit of its scale, and no multiplication by ``10**scale``
    (which overflows a DECIMAL(38) of a large scale on both engines) is needed."""
    exact = exp.cast(total, exp.DataType.build(f"DECIMAL({MAX_PRECISION}, {scale})"))
    digits = exp.Anonymous(
        this="REPLACE", expressions=[_text(exact), exp.Literal.string("."), exp.Literal.string("")]
    )
    return exp.cast(digits, wide.copy())


def _quotient(dividend: exp.Expr, divisor: exp.Expr, dialect: str) -> exp.Expr:
    """``dividend // divisor`` of non-negative integers below 10**38, exactly.

    DuckDB divides HUGEINTs exactly. Spark's ``div`` answers a BIGINT and its ``/`` rounds
    wide quotients, so there the dividend is split at 10**20: the high part's quotient fits a
    BIGINT, and the rest (below divisor * 10**20) leaves a quotient below 2 * 10**20, which
    ``(x - x % divisor) / divisor`` gives exactly."""
    if dialect != "spark":
        return _p(exp.IntDiv(this=dividend, expression=divisor))
    wide = exp.DataType.build("DECIMAL(38, 0)")
    high = _p(exp.IntDiv(this=dividend.copy(), expression=number(_SPLIT)))
    low = _p(exp.Mod(this=dividend.copy(), expression=number(_SPLIT)))
    high_quotient = _p(exp.IntDiv(this=high.copy(), expression=divisor.copy()))
    high_rest = _p(
        exp.Sub(this=high, expression=_p(exp.Mul(this=high_quotient, expression=divisor.copy())))
    )
    rest = _p(
        exp.cast(
            _p(
                exp.Add(this=_p(exp.Mul(this=high_rest, expression=number(_SPLIT))), expression=low)
            ),
            wide.copy(),
        )
    )
    exact = _p(
        exp.Sub(this=rest, expression=_p(exp.Mod(this=rest.copy(), expression=divisor.copy())))
    )
    low_quotient = exp.cast(_p(exp.Div(this=exact, expression=divisor.copy())), wide.copy())
    shifted = exp.cast(
        _p(exp.Mul(this=high_quotient.copy(), expression=number(_SPLIT))), wide.copy()
    )
    return _p(exp.Add(this=shifted, expression=_p(low_quotient)))


def _decimal_from_units(units: exp.Expr, negative: exp.Expr, target: int) -> exp.Expr:
    """The DECIMAL(38, target) whose units of its last digit are ``units`` (not negative),
    negated where ``negative``: built from text, exact on both engines."""
    digits = _text(units)
    if target:
        # Zeros in front so the integer part has a digit; then the point before the last
        # ``target`` digits.
        padded = exp.DPipe(this=exp.Literal.string("0" * target), expression=digits, safe=True)
        length = exp.Length(this=padded.copy())
        whole_length = _p(exp.Sub(this=length, expression=number(target)))
        whole = exp.Substring(this=padded.copy(), start=number(1), length=whole_length)
        fraction = exp.Substring(
            this=padded, start=_p(exp.Add(this=whole_length.copy(), expression=number(1)))
        )
        digits = exp.DPipe(
            this=exp.DPipe(this=whole, expression=exp.Literal.string("."), safe=True),
            expression=fraction,
            safe=True,
        )
    sign = exp.If(this=negative, true=exp.Literal.string("-"), false=exp.Literal.string(""))
    text = exp.DPipe(this=sign, expression=digits, safe=True)
    return exp.cast(text, exp.DataType.build(f"DECIMAL({MAX_PRECISION}, {target})"))


def decimal_average(
    total: exp.Expr,
    present: exp.Expr,
    scale: int,
    wide: exp.DataType,
    *,
    precision: int = MAX_PRECISION - AVERAGE_EXTRA_DIGITS,
    dialect: str = "duckdb",
) -> exp.Expr:
    """``total / present`` as a DECIMAL(38, ``average_scale(scale, precision)``), rounded half
    away from zero at its last digit, the same on every engine and whatever the summation
    order.

    Engines divide decimals differently (DuckDB in DOUBLE, Spark with its own rounding), so
    the quotient is computed by integer division: ``total`` in units of its last digit,
    divided by the count, then the extra digits from the remainder, then the rounding.
    ``present`` is the count of non-NULL values (NULL or 0 give NULL).
    """
    target = average_scale(scale, precision)
    extra = target - scale

    # A sign-weighted count is negative where a group's marks outnumber its insertions (a
    # policy whose views drop insertions, such as dedup): divide magnitudes, then sign.
    count = _p(exp.Abs(this=_p(exp.Nullif(this=present, expression=number(0)))))
    units = _p(_units(total, scale, wide))
    magnitude = _p(exp.Abs(this=units))

    def remainder(dividend: exp.Expr, quotient: exp.Expr) -> exp.Expr:
        return _p(exp.Sub(this=dividend, expression=_p(exp.Mul(this=quotient, expression=count))))

    whole = _p(exp.cast(_quotient(magnitude, count, dialect), wide.copy()))
    rest = _p(exp.Mul(this=remainder(magnitude, whole), expression=number(10**extra)))
    digits = _p(exp.IntDiv(this=rest, expression=count))
    last = remainder(rest, digits)
    round_up = exp.If(
        this=exp.GTE(this=_p(exp.Mul(this=number(2), expression=last)), expression=count),
        true=number(1),
        false=number(0),
    )
    scaled = _p(
        exp.cast(
            _p(
                exp.Add(
                    this=_p(
                        exp.Add(
                            this=_p(exp.Mul(this=whole, expression=number(10**extra))),
                            expression=digits,
                        )
                    ),
                    expression=_p(round_up),
                )
            ),
            wide.copy(),
        )
    )
    negative = exp.NEQ(
        this=_p(exp.LT(this=units, expression=number(0))),
        expression=_p(exp.LT(this=present.copy(), expression=number(0))),
    )
    return _decimal_from_units(scaled, negative, target).copy()
