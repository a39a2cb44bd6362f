"""What view generation needs to know about a table: its columns, key and merge policy."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ledger.log.state import TableState
from ledger.schema import ROW_ID
from merge_policies import load_policy
from merge_policies.base import MergePolicy


@dataclass(frozen=True)
class TableSpec:
    """The parts of a table's log state that shape its views."""

    columns: tuple[str, ...]  # user columns, in schema order
    types: tuple[pa.DataType, ...]  # their Arrow types
    key_columns: tuple[str, ...]  # the primary key, or _row_id
    generated_row_id: bool
    policy: MergePolicy

    @staticmethod
    def of(state: TableState) -> TableSpec:
        schema = state.schema
        return TableSpec(
            columns=tuple(schema.names),
            types=tuple(schema.type_of(n) for n in schema.names),
            key_columns=state.config.key_columns,
            generated_row_id=state.config.generated_row_id,
            policy=load_policy(state.config.policy, schema, state.config),
        )

    @property
    def value_columns(self) -> tuple[str, ...]:
        """What an entry carries besides its system columns: user columns (and ``_row_id``)."""
        return (*self.columns, ROW_ID) if self.generated_row_id else self.columns

    def type_of(self, column: str) -> pa.DataType:
        return self.types[self.columns.index(column)]
