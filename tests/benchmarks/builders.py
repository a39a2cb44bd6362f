"""Data builders shared by the DuckDB benchmarks: one table shape, its rows and their slices.

Every benchmark of views, merges and corrections uses the same six columns in their exact Arrow
types, so rows go into the table without a conversion (what is measured is the library's work).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ledger.schema import DML_TYPE

# A key, a BIGINT and an INTEGER of moderate cardinality, a DOUBLE, a VARCHAR, a TIMESTAMP.
SCHEMA = {
    "k": "BIGINT",
    "a": "BIGINT",
    "q": "INTEGER",
    "b": "DOUBLE",
    "s": "VARCHAR",
    "ts": "TIMESTAMP",
}


def column_values(n: int, rng: np.random.Generator) -> dict[str, pa.Array]:
    """The non-key columns in the table's exact Arrow types: a BIGINT and an INTEGER of moderate
    cardinality, a DOUBLE, a VARCHAR of 5,000 distinct values, a TIMESTAMP over a month."""
    notes = pa.array([f"note-{i:05d}-{'x' * (i % 17)}" for i in range(5_000)], pa.string())
    start = np.datetime64("2024-01-01T00:00:00", "us")
    month_us = 30 * 86_400 * 1_000_000
    return {
        "a": pa.array(rng.integers(0, 10_000, n, dtype=np.int64)),
        "q": pa.array(rng.integers(-1_000, 1_000, n, dtype=np.int32)),
        "b": pa.array(rng.random(n) * 100.0),
        "s": notes.take(pa.array(rng.integers(0, len(notes), n))),
        "ts": pa.array(
            start + rng.integers(0, month_us, n).astype("timedelta64[us]"), pa.timestamp("us")
        ),
    }


def keyed_rows(n: int, seed: int) -> pa.Table:
    """n rows with shuffled distinct keys 0..n-1, so every commit spans the whole key range."""
    rng = np.random.default_rng(seed)
    return pa.table({"k": pa.array(rng.permutation(n).astype(np.int64)), **column_values(n, rng)})


def with_dml(rows: pa.Table, sign: int) -> pa.Table:
    """``rows`` as entries of one sign (+1 insertions, -1 delete marks)."""
    return rows.append_column(DML_TYPE, pa.repeat(pa.scalar(sign, pa.int8()), rows.num_rows))


def slices(n: int, parts: int) -> Iterator[tuple[int, int]]:
    """``(offset, length)`` of ``parts`` near-equal slices of ``n`` rows."""
    bounds = np.linspace(0, n, parts + 1).astype(int)
    yield from ((int(b), int(e - b)) for b, e in itertools.pairwise(bounds))
