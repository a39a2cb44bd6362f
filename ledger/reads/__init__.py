"""The read path on the embedded engine: a snapshot's files -> a query tree of ``ledger.sql``
-> a lazy DuckDB relation.

``views`` (the public reading API) checks its arguments and calls these; ``Table.to_arrow``
calls :func:`ledger.reads.visible.rows` directly, so nothing under ``ledger`` imports ``views``.
"""
