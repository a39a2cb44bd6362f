"""Live entries: what the ledger holds for a key once opposite entries cancel out.

Entries of a key that carry the same values cancel by sign: an insertion and a later delete mark
with equal values sum to zero. The *live entries* of a key are its distinct value tuples whose
signs sum above zero, each as many times as that sum. The *visible row* of a key is the live
entry inserted last (by ``trx_id``, ``trx_seq``). Read-modify-write operations cancel every live
entry of a key, so sums over the raw ledger stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql import ident, idents

NET = "__ledger_net"
ORDER = "__ledger_order"
EXCESS = "__ledger_excess"
_SIGN = "__ledger_sign"


def negative_zero_flags(float_columns: Sequence[str]) -> list[str]:
    """Per FLOAT/DOUBLE column, whether it holds -0.0 (atan2 keeps the sign of a zero), to
    group by next to the values: SQL compares -0.0 equal to 0.0, so grouping by the value alone
    would merge the two and show whichever came first (a visible 0.0 could come back as -0.0)."""
    return [
        f"({ident(c)} = 0 AND atan2({ident(c)}, -1) < 0) AS __ledger_negative_zero_{i}"
        for i, c in enumerate(float_columns)
    ]


def live_entries_sql(
    source: str, value_columns: Sequence[str], float_columns: Sequence[str] = ()
) -> str:
    """Distinct live value tuples of ``source`` with their multiplicity and insertion order
    (``float_columns``: the FLOAT/DOUBLE ones, whose -0.0 and 0.0 stay apart)."""
    cols = ", ".join([idents(list(value_columns)), *negative_zero_flags(float_columns)])
    return (
        f"SELECT {cols}, CAST(sum({ident(DML_TYPE)}) AS BIGINT) AS {NET}, "
        f"max(CAST({ident(TRX_ID)} AS HUGEINT) * 4294967296 + {ident(TRX_SEQ)}) "
        f"FILTER (WHERE {ident(DML_TYPE)} = 1) AS {ORDER} "
        f"FROM {source} GROUP BY ALL HAVING sum({ident(DML_TYPE)}) > 0"
    )


def latest_entries_sql(
    source: str, key_columns: Sequence[str], value_columns: Sequence[str], latest_first: str
) -> str:
    """For replacing tables: the latest entry of each key (by ``latest_first``, an ORDER BY),
    kept only when it is an insertion, in the shape of :func:`live_entries_sql` (one live entry
    per key, which is both the visible row and the entry an update cancels)."""
    cols = idents(list(value_columns))
    return (
        f"SELECT {cols}, CAST(1 AS BIGINT) AS {NET}, CAST(0 AS HUGEINT) AS {ORDER} FROM ("
        f"SELECT {cols}, {ident(DML_TYPE)} FROM {source} QUALIFY row_number() OVER "
        f"(PARTITION BY {idents(list(key_columns))} ORDER BY {latest_first}) = 1"
        f") WHERE {ident(DML_TYPE)} = 1"
    )


def visible_rows_sql(
    live: str,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    float_columns: Sequence[str] = (),
) -> str:
    """The latest live row of each key, from a relation made by :func:`live_entries_sql` (with
    the same ``float_columns``)."""
    # DuckDB picks the first row of a window through arg_max, whose sort drops the sign of a
    # zero: the sign is put back from the group's flag.
    flag_of = {c: f"__ledger_negative_zero_{i}" for i, c in enumerate(float_columns)}
    picked = [
        f"CASE WHEN {flag_of[c]} THEN -abs({ident(c)}) ELSE {ident(c)} END AS {ident(c)}"
        if c in flag_of
        else ident(c)
        for c in value_columns
    ]
    return (
        f"SELECT {', '.join(picked)} FROM {live} "
        f"QUALIFY row_number() OVER (PARTITION BY {idents(list(key_columns))} "
        f"ORDER BY {ORDER} DESC) = 1"
    )


def expand_sql(live: str, value_columns: Sequence[str]) -> str:
    """One row per live entry: each tuple repeated by its multiplicity."""
    cols = idents(list(value_columns))
    return f"SELECT {cols} FROM (SELECT {cols}, unnest(range({NET})) AS __i FROM {live})"


def unmatched_marks_sql(
    live: str, incoming: str, key_columns: Sequence[str], value_columns: Sequence[str]
) -> str:
    """The value tuples that the delete marks of ``incoming`` (entries with their
    ``dml_type``) would cancel more often than they are live: in ``live`` (one row per live
    entry, as :func:`expand_sql` gives) or inserted by ``incoming`` itself. ``EXCESS`` says by
    how many. Grouping is the same as :func:`live_entries_sql`'s, so "equal values" means the
    same here as in every read."""
    cols = idents(list(value_columns))
    keys = idents(list(key_columns))
    sign = ident(_SIGN)
    marked = f"SELECT {keys} FROM {incoming} WHERE {ident(DML_TYPE)} = -1"
    return (
        f"SELECT {cols}, CAST(-sum({sign}) AS BIGINT) AS {EXCESS} FROM ("
        f"SELECT {cols}, 1 AS {sign} FROM {live} UNION ALL "
        f"SELECT {cols}, CAST({ident(DML_TYPE)} AS INTEGER) AS {sign} FROM {incoming} "
        f"SEMI JOIN ({marked}) USING ({keys})"
        f") GROUP BY ALL HAVING sum({sign}) < 0"
    )
