"""The change feed as a tree: entries added after a version, typed as Delta Lake's change data
feed types them (``insert``, ``delete``, ``update_preimage``, ``update_postimage``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from ledger.sql.dialects import Dialect
from ledger.sql.names import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    COPY,
    DML_TYPE,
    NET,
    RANK,
    ROW_ID,
    TRX_ID,
    TRX_SEQ,
)
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, alias, col, cols, dml, number, relation, using

WRITTEN = "written"  # the alias of written entries joined to their commits
COMMITS = "commits"  # the alias of the commits (trx_id, _commit_version, _commit_timestamp)


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
                    this=exp.EQ(this=dml(), expression=number(value)),
                    true=number(1),
                    false=number(0),
                )
            ),
            partition_by=cols(per_commit_key),
        )
        return exp.EQ(this=window, expression=number(1))

    is_insertion = exp.EQ(this=dml(), expression=number(1))
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
    net = exp.Window(this=exp.Sum(this=dml()), partition_by=cols(tuple_of_commit))
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
                exp.GT(this=exp.Mul(this=dml(), expression=col(NET)), expression=number(0)),
                exp.LTE(this=col(RANK), expression=exp.Abs(this=col(NET))),
            )
        )
    )


# --- change entries: what the change feed above reads ---------------------------------------------


def written_entries(written: str, commits: str, columns: Sequence[str]) -> exp.Select:
    """The entries of the relation ``written`` (files transactions added) stamped with their
    commit's ``_commit_version`` and ``_commit_timestamp``, found by ``trx_id`` in the relation
    ``commits`` (``trx_id``, ``_commit_version``, ``_commit_timestamp``)."""
    return (
        exp.select(
            *(col(c, WRITTEN) for c in columns),
            col(COMMIT_VERSION, COMMITS),
            col(COMMIT_TIMESTAMP, COMMITS),
        )
        .from_(exp.alias_(relation(written), WRITTEN, quoted=True))
        .join(exp.alias_(relation(commits), COMMITS, quoted=True), using=using([TRX_ID]))
    )


def replaced_entries(
    signed: str, columns: Sequence[str], version: int, timestamp_ms: int, dialect: Dialect
) -> exp.Select:
    """What one commit that replaced files changed, from the relation ``signed`` (the entries
    of its added files, and of its removed files with the opposite sign): entries that cancel
    (an insertion and its mark dropped together, a row a rewrite kept) are left out, the rest
    appear as many times as their net sign says, stamped with the commit's version and time."""
    values = [c for c in columns if c not in (TRX_ID, TRX_SEQ, DML_TYPE)]
    net = exp.cast(exp.Sum(this=dml()), dialect.count_type)
    netted = (
        exp.select(
            *cols(values),
            alias(exp.Max(this=col(TRX_ID)), TRX_ID),
            alias(exp.Max(this=col(TRX_SEQ)), TRX_SEQ),
            alias(net, NET),
        )
        .from_(relation(signed))
        .group_by(*cols(values))
        .having(exp.NEQ(this=exp.Sum(this=dml()), expression=number(0)))
    )
    copies = exp.Explode(this=exp.GenerateSeries(start=number(1), end=exp.Abs(this=col(NET))))
    sign = exp.cast(exp.Sign(this=col(NET)), "TINYINT")
    micros = exp.Mul(this=number(timestamp_ms), expression=number(1000))
    stamp = exp.Anonymous(this=dialect.timestamp_from_micros, expressions=[micros])
    repeated = exp.select(
        *(alias(sign.copy(), c) if c == DML_TYPE else col(c) for c in columns),
        alias(exp.cast(number(version), "BIGINT"), COMMIT_VERSION),
        alias(stamp, COMMIT_TIMESTAMP),
        alias(copies, COPY),
    ).from_(exp.paren(netted, copy=False))
    shown = [*columns, COMMIT_VERSION, COMMIT_TIMESTAMP]
    return exp.select(*cols(shown)).from_(exp.paren(repeated, copy=False))
