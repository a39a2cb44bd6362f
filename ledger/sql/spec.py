"""What view generation needs to know about a table: its columns, key and merge policy."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
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
        """The spec of ``state``, made once per state object: a view call asks for it several
        times, and a table handle keeps its state while the log is unchanged."""
        with _SPECS_LOCK:
            kept = _SPECS.get(id(state))
            if kept is not None and kept[0]() is state:
                _SPECS.move_to_end(id(state))
                return kept[1]
        spec = TableSpec._made(state)
        with _SPECS_LOCK:
            _SPECS[id(state)] = (weakref.ref(state), spec)
            while len(_SPECS) > SPECS_KEPT:
                _SPECS.popitem(last=False)
        return spec

    @staticmethod
    def _made(state: TableState) -> TableSpec:
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


SPECS_KEPT = 256  # specs kept, one per table state object (an id is checked by a weak reference)
_SPECS: OrderedDict[int, tuple[weakref.ref[TableState], TableSpec]] = OrderedDict()
_SPECS_LOCK = threading.Lock()
