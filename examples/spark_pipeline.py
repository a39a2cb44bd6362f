"""The same ledger table from a Spark pipeline and from DuckDB.

Run it with ``.venv/bin/python examples/spark_pipeline.py`` (a temporary warehouse; pass a
folder as the first argument to keep it). Needs ``pip install 'ledger-tables[spark]'``.

A day of sensor readings is loaded from a Spark DataFrame (the executors write the Parquet
files; one commit). A late batch of corrections is upserted from another DataFrame: Spark joins
it against the visible rows, writes a delete mark carrying each old value and an insertion of
the new one. The totals are then read three ways, all equal: on Spark (a DataFrame), on DuckDB
(``views.totals``) and after a merge that Spark ran.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import ledger
import ledger.spark as ls
import views

READINGS = [
    (sensor, hour, 20.0 + sensor + hour / 10) for sensor in range(1, 4) for hour in range(4)
]
# Sensor 2 was miscalibrated for hours 1-2 (+5 degrees); hour 3 of sensor 3 is a duplicate.
CORRECTIONS = [(2, 1, 17.1), (2, 2, 17.2)]
DROPPED = [(3, 3)]


def main(path: str | None = None) -> dict[str, Any]:
    from ledger.engines.spark.session import session

    spark = session()
    wh = ledger.connect(path or tempfile.mkdtemp())
    readings = wh.create_table(
        "readings",
        {"sensor": "INTEGER", "hour": "INTEGER", "celsius": "DOUBLE"},
        primary_key=["sensor", "hour"],
    )
    schema = "sensor int, hour int, celsius double"
    ls.insert(readings, spark.createDataFrame(READINGS, schema))
    ls.upsert(readings, spark.createDataFrame(CORRECTIONS, schema))
    ls.delete(readings, spark.createDataFrame(DROPPED, "sensor int, hour int"))

    on_spark = sorted(
        tuple(row) for row in ls.totals(readings, by="sensor", avg="celsius").collect()
    )
    on_duckdb = sorted(views.totals(readings, by="sensor", avg="celsius").fetchall())
    merged = ls.merge(readings)
    after_merge = sorted(views.totals(readings, by="sensor", avg="celsius").fetchall())
    result = {
        "spark": on_spark,
        "duckdb": on_duckdb,
        "after_merge": after_merge,
        "entries": (merged.entries_in, merged.entries_out),
    }
    for name, rows in result.items():
        print(f"{name}: {rows}")
    return result


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
