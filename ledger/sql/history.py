"""The history of keys as a tree: every entry of the given keys with its commit."""

from __future__ import annotations

from sqlglot import exp

from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION, DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql.spec import TableSpec
from ledger.sql.trees import col, relation, using


def history(spec: TableSpec, entries: str, keys: str, commits: str) -> exp.Select:
    """Every entry of the keys in ``keys``, oldest first, with its commit's version and time
    from ``commits`` (``trx_id``, ``_commit_version``, ``_commit_timestamp``)."""
    shown = [*spec.value_columns, TRX_ID, TRX_SEQ, DML_TYPE]
    return (
        exp.select(
            *(col(c, "e") for c in shown),
            col(COMMIT_VERSION, "c"),
            col(COMMIT_TIMESTAMP, "c"),
        )
        .from_(exp.alias_(relation(entries), "e", table=True))
        .join(relation(keys), using=using(spec.key_columns), join_type="semi")
        .join(
            exp.alias_(relation(commits), "c", table=True),
            using=using([TRX_ID]),
            join_type="left",
        )
        .order_by(
            *(col(k, "e") for k in spec.key_columns),
            col(TRX_ID, "e"),
            col(TRX_SEQ, "e"),
        )
    )
