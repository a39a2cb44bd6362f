"""Averages of DECIMAL columns, exact and the same on every engine."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
from sqlglot import exp

from ledger.sql.spec import TableSpec
from ledger.sql.trees import number


def decimal_scales(spec: TableSpec) -> dict[str, int]:
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


def decimal_average(total: exp.Expr, present: exp.Expr, scale: int, wide: exp.DataType) -> exp.Expr:
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
    count = p(exp.Abs(this=p(exp.Nullif(this=present, expression=number(0)))))
    units = p(exp.cast(p(exp.Mul(this=total, expression=number(10**scale))), wide.copy()))
    magnitude = p(exp.Abs(this=units))

    def remainder(dividend: exp.Expr, quotient: exp.Expr) -> exp.Expr:
        return p(exp.Sub(this=dividend, expression=p(exp.Mul(this=quotient, expression=count))))

    whole = p(exp.cast(p(exp.IntDiv(this=magnitude, expression=count)), wide.copy()))
    rest = p(exp.Mul(this=remainder(magnitude, whole), expression=number(10**extra)))
    digits = p(exp.IntDiv(this=rest, expression=count))
    last = remainder(rest, digits)
    round_up = exp.If(
        this=exp.GTE(this=p(exp.Mul(this=number(2), expression=last)), expression=count),
        true=number(1),
        false=number(0),
    )
    scaled = p(
        exp.Add(
            this=p(
                exp.Add(
                    this=p(exp.Mul(this=whole, expression=number(10**extra))), expression=digits
                )
            ),
            expression=p(round_up),
        )
    )
    signed = exp.If(
        this=exp.NEQ(
            this=p(exp.LT(this=units, expression=number(0))),
            expression=p(exp.LT(this=present.copy(), expression=number(0))),
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
