"""Small typed Arrow tables for tests: ``rows("k g x", (1, "a", 1), (2, "b", 2))``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ledger.schema import ROW_ID

# The Arrow type of every column name the engine suites use; ``types=`` overrides one.
ARROW = {
    "k": pa.int64(),
    "g": pa.string(),
    "x": pa.int64(),
    "d": pa.decimal128(10, 2),
    "v": pa.int64(),
    "n": pa.int64(),
    "i": pa.int32(),
    "f": pa.float32(),
    "s": pa.string(),
    ROW_ID: pa.int64(),
    "dml_type": pa.int8(),
}


def rows(
    columns: str, *values: tuple[Any, ...], types: dict[str, pa.DataType] | None = None
) -> pa.Table:
    """An Arrow table of ``columns`` (space-separated names, typed by ``ARROW``/``types``)."""
    names = columns.split()
    kinds = {**ARROW, **(types or {})}
    return pa.table({n: pa.array([v[i] for v in values], kinds[n]) for i, n in enumerate(names)})
