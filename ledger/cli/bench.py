"""``ledger bench``: a few seconds of figures, each a ratio against a plain baseline measured
in the same process on the same data (medians of a few runs), printed beside its target.

- append: ``table.insert`` of N rows against ``pyarrow.parquet.write_table`` of the same Arrow
  table (the ledger adds system columns, sorting, statistics and a log commit);
- visible: ``views.visible`` read whole against DuckDB reading the same Parquet files;
- totals: ``views.totals`` per group against a plain DuckDB ``GROUP BY`` over the same files;
- count: ``table.count()`` from the log against DuckDB counting the same files.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import pyarrow.parquet as pq

from ledger.cli import output
from ledger.cli.output import output_options
from ledger.cli.progress import activity
from ledger.engines.duckdb.session import connect as connect_duckdb
from ledger.reads import front
from ledger.warehouse import connect


@dataclass(frozen=True)
class Figure:
    name: str
    ledger_s: float
    baseline_s: float
    target: float  # the ratio must be at most this

    def row(self) -> dict[str, Any]:
        ratio = self.ledger_s / self.baseline_s if self.baseline_s > 0 else float("inf")
        return {
            "figure": self.name,
            "ledger_ms": round(self.ledger_s * 1000, 2),
            "baseline_ms": round(self.baseline_s * 1000, 2),
            "ratio": round(ratio, 2),
            "target": f"<= {self.target}",
            "ok": ratio <= self.target,
        }


def sample_rows(count: int) -> pa.Table:
    """Payments: a text key, 100 accounts, amounts from 0.00 to 99.99."""
    ids = [f"P-{i:09d}" for i in range(count)]
    return pa.table(
        {
            "payment_id": pa.array(ids),
            "account": pa.array([f"acct-{i % 100:03d}" for i in range(count)]),
            "amount": pa.array(
                [Decimal(i % 10_000).scaleb(-2) for i in range(count)], pa.decimal128(18, 2)
            ),
        }
    )


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(rows: int, repeats: int) -> list[Figure]:
    data = sample_rows(rows)
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as folder:
        warehouse = connect(str(Path(folder) / "warehouse"))
        schema = {"payment_id": "VARCHAR", "account": "VARCHAR", "amount": "DECIMAL(18,2)"}
        tables = iter(range(repeats))

        def append() -> None:
            warehouse.create_table(f"t{next(tables)}", schema, primary_key="payment_id").insert(
                data
            )

        raw_files = iter(range(repeats))

        def raw_write() -> None:
            pq.write_table(data, str(Path(folder) / f"raw{next(raw_files)}.parquet"))

        figures = [
            Figure(
                "append",
                median_seconds(append, repeats),
                median_seconds(raw_write, repeats),
                4.0,
            )
        ]
        table = warehouse.table("t0")
        files = table.files()
        con = connect_duckdb()

        def raw() -> Any:
            return con.read_parquet(files)

        figures += [
            Figure(
                "visible",
                median_seconds(lambda: front.visible(table).to_arrow_table(), repeats),
                median_seconds(lambda: raw().to_arrow_table(), repeats),
                3.0,
            ),
            Figure(
                "totals",
                median_seconds(
                    lambda: front.totals(table, by="account", sum="amount").fetchall(),
                    repeats,
                ),
                median_seconds(
                    lambda: raw().aggregate("account, count(*), sum(amount)", "account").fetchall(),
                    repeats,
                ),
                3.0,
            ),
            Figure(
                "count",
                median_seconds(table.count, repeats),
                median_seconds(lambda: raw().aggregate("count(*)").fetchall(), repeats),
                1.0,
            ),
        ]
        con.close()
    return figures


@click.command(
    epilog="""\b
Examples:
  ledger bench
  ledger bench --rows 1000000 --repeats 5 --json
"""
)
@click.option("--rows", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True)
@output_options
def bench(rows: int, repeats: int, output_format: str | None) -> None:
    """Measure appends and reads against plain Parquet and DuckDB baselines (a few seconds,
    in a temporary folder; the warehouse is not touched)."""
    with activity(f"bench {rows} rows"):
        figures = measure(rows, repeats)
    output.print_rows(
        [f.row() for f in figures], output_format, title=f"{rows} rows, median of {repeats}"
    )


COMMANDS = [bench]
