"""Custom SQL (IceDB's custom merge query): the user's query replaces the merged entries.

The query reads the merged entries from the relation ``entries`` (every column of the data files,
system columns included) and must return exactly the data files' columns; the result's schema is
checked against the table's before anything is written. Views are only guaranteed unchanged by
the built-in policies: what a custom query does to the ledger's meaning is the user's contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from ledger.errors import InvalidArgumentError
from ledger.log.entries import TableConfig
from ledger.maintenance.merge import check_query
from ledger.schema import TableSchema
from ledger.sql_guard import checked_select
from merge_policies.base import MergeContext, PolicyDefaults, check_options

if TYPE_CHECKING:
    import pyarrow as pa

NAME = "custom"
SOURCE = "entries"
_EXAMPLE = (
    '{"name": "custom", "sql": "SELECT * FROM entries QUALIFY row_number() OVER '
    '(PARTITION BY id ORDER BY trx_id DESC) = 1"}'
)


@dataclass(frozen=True)
class CustomPolicy(PolicyDefaults):
    sql: str
    name: str = NAME

    @property
    def signs_consistent(self) -> bool:
        return True

    def check_against_files(self, files: pa.Schema) -> None:
        """Bind the query over empty entries of schema ``files``: it must return exactly their
        columns, in types that convert to theirs (no data is read)."""
        check_query(self.sql, files, "custom merge query")

    def merge_sql(self, context: MergeContext) -> str:
        if context.source != SOURCE:
            raise InvalidArgumentError(
                f"custom merge queries read {SOURCE!r}, not {context.source!r}"
            )
        return self.sql


def build(options: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> CustomPolicy:
    check_options(NAME, options, ("sql",), _EXAMPLE)
    sql = options.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidArgumentError(f"merge policy 'custom' needs its query as sql, e.g. {_EXAMPLE}")
    checked = checked_select(sql, (SOURCE,), "merge policy 'custom': the query")
    tree = sqlglot.parse_one(checked, read="duckdb")
    if not any(t.name.lower() == SOURCE for t in tree.find_all(exp.Table)):
        raise InvalidArgumentError(
            f"merge policy 'custom': the query must read the merged entries from {SOURCE!r}"
        )
    # The checked rendering is what runs, so nothing the check did not see can reach the engine.
    return CustomPolicy(checked)
