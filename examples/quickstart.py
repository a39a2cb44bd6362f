"""A tour of a ledger table on a local warehouse, read with DuckDB.

Run it with ``make demo`` (or ``.venv/bin/python examples/quickstart.py``). It starts from an
empty ``./warehouse`` folder next to this repository's README and leaves it there for you to
look at afterwards (``make clean`` removes it); pass another folder as the first argument to put
the warehouse there instead.

The table is a bank-style payments ledger. Nothing is ever edited in place: a correction is a
delete mark (dml_type = -1) carrying the old values plus an insertion (dml_type = +1) of the new
ones, so ``sum(dml_type * amount)`` over the raw entries is the exact balance.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa

import ledger

DuckDB = duckdb.DuckDBPyConnection
WAREHOUSE = Path(
    sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "warehouse"
)

# DuckDB settings the project uses everywhere: never download extensions at run time.
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

BALANCES = """
    SELECT account, sum(dml_type * amount) AS balance, count(*) AS entries
    FROM ledger GROUP BY account ORDER BY account
"""

# The visible row of a key: its newest insertion, for keys whose signs sum above zero. (A later
# part of the project generates this view; written out here to show there is no magic.)
VISIBLE = """
    WITH live AS (SELECT payment_id FROM ledger GROUP BY payment_id HAVING sum(dml_type) > 0)
    SELECT payment_id, account, amount, booked_at
    FROM ledger SEMI JOIN live USING (payment_id)
    WHERE dml_type = 1
    QUALIFY row_number() OVER (PARTITION BY payment_id ORDER BY trx_id DESC, trx_seq DESC) = 1
    ORDER BY payment_id
"""


def title(text: str) -> None:
    print(f"\n=== {text} ".ljust(100, "="))


@contextmanager
def raw_ledger(table: ledger.Table, version: int | None = None) -> Iterator[DuckDB]:
    """A DuckDB connection where the view ``ledger`` is every entry of ``table`` at ``version``."""
    con = duckdb.connect(config=dict(NO_DOWNLOADS))
    try:
        table.scan(version=version, con=con).create_view("ledger")
        yield con
    finally:
        con.close()


def show_ledger(table: ledger.Table, sql: str, *, version: int | None = None) -> None:
    """Print the result of ``sql`` over the raw ledger of ``table`` at ``version``."""
    with raw_ledger(table, version) as con:
        con.sql(sql).show(max_width=200)


def main() -> None:
    shutil.rmtree(WAREHOUSE, ignore_errors=True)
    warehouse = ledger.connect(str(WAREHOUSE))

    title("1. create a ledger table")
    payments = warehouse.create_table(
        "payments",
        {
            "payment_id": "VARCHAR",
            "account": "VARCHAR",
            "amount": "DECIMAL(18,2)",
            "booked_at": "TIMESTAMP",
        },
        primary_key="payment_id",
        partition_by="month(booked_at)",
    )
    print(payments, payments.schema)
    print("config:", payments.config)

    title("2. deposits: a blind append, one commit")
    nov = dt.datetime(2026, 11, 2, 9, 30)
    info = payments.insert(
        [
            {"payment_id": "P-1", "account": "alice", "amount": 100, "booked_at": nov},
            {"payment_id": "P-2", "account": "bob", "amount": 250, "booked_at": nov},
            {"payment_id": "P-3", "account": "alice", "amount": 1000, "booked_at": nov},
            {"payment_id": "P-4", "account": "carol", "amount": 40, "booked_at": nov},
        ],
        app_id="bank-feed",
        batch=1,
    )
    print(info)
    deposits_version = info.version
    replay = payments.insert(
        [{"payment_id": "P-1", "account": "alice", "amount": 100, "booked_at": nov}],
        app_id="bank-feed",
        batch=1,
    )
    print("the feed replays batch 1 after a crash -> no-op:", replay)

    title("3. P-3 was keyed in as 1000.00 instead of 100.00: correct it with update")
    print(payments.update([{"payment_id": "P-3", "amount": 100}]))  # other columns are kept
    show_ledger(
        payments,
        "SELECT * FROM ledger WHERE payment_id = 'P-3' ORDER BY trx_id, trx_seq",
    )

    title("4. P-4 was a test payment: delete it (a delete mark carrying its values)")
    print(payments.delete(["P-4"]))

    title("5. a transaction: read, then move a payment and book a fee, all under one trx_id")
    with payments.transaction() as tx:
        current = tx.lookup(["P-2"]).to_pylist()[0]  # counts as read: a conflict check at commit
        print("P-2 before:", current)
        tx.update([{"payment_id": "P-2", "account": "dave"}])
        tx.insert(
            [
                {
                    "payment_id": "F-1",
                    "account": "dave",
                    "amount": Decimal("-2.50"),
                    "booked_at": dt.datetime(2026, 12, 1),
                }
            ]
        )
    print(tx.commit_info)

    title("6. the raw ledger: every entry ever committed")
    show_ledger(payments, "SELECT * FROM ledger ORDER BY trx_id, trx_seq, payment_id")

    title("7. exact balances straight from the raw ledger: sum(dml_type * amount)")
    show_ledger(payments, BALANCES)
    print("the visible rows, for comparison:")
    show_ledger(payments, VISIBLE)
    with raw_ledger(payments) as con:
        ledger_total = con.sql("SELECT sum(dml_type * amount) FROM ledger").fetchall()[0][0]
        visible_total = con.sql(f"SELECT sum(amount) FROM ({VISIBLE})").fetchall()[0][0]
    print(f"total over the raw ledger {ledger_total} == total of the visible rows {visible_total}")
    assert ledger_total == visible_total

    title("8. counts from the log alone (no data file is opened)")
    print("logical rows:", payments.count())
    print("rows booked in 2026-11:", payments.count(partitions={"booked_at_month": "2026-11"}))
    print("data files:", len(payments.files()))
    reopened = ledger.connect(str(WAREHOUSE)).table("payments")  # as another process would
    print(f"reopened from the log: {reopened}, {reopened.count()} rows")

    title(f"9. time travel: the table at version {deposits_version}, before any correction")
    print("logical rows then:", payments.count(version=deposits_version))
    show_ledger(payments, BALANCES, version=deposits_version)
    first_commit_time = payments.history()[deposits_version].timestamp
    at_time = payments.snapshot(timestamp=first_commit_time)
    print(f"the snapshot at {first_commit_time:%H:%M:%S.%f} UTC is version {at_time.version}")

    title("10. history(): one record per commit")
    history = [
        {
            "version": h.version,
            "operation": h.operation,
            "trx_id": h.trx_id,
            "files_added": h.files_added,
            "inserted": h.inserted,
            "deleted": h.deleted,
            "app_id": h.app_id,
            "batch": h.batch,
        }
        for h in payments.history()
    ]
    con = duckdb.connect(config=dict(NO_DOWNLOADS))
    con.from_arrow(pa.Table.from_pylist(history)).show(max_width=200)
    con.close()

    title("11. on storage: an open JSON-lines log next to plain Parquet files")
    log_folder = WAREHOUSE / "payments" / "_log"
    for path in sorted(log_folder.iterdir()):
        print(" ", path.relative_to(WAREHOUSE))
    update_commit = log_folder / f"{deposits_version + 1:020d}.jsonl"
    print(f"\n{update_commit.relative_to(WAREHOUSE)}:")
    print(update_commit.read_text())
    print(f"(see docs/format.md; the warehouse stays in {WAREHOUSE})")

    title("12. merge: collapse the corrections away; every answer stays the same")
    before = len(payments.files())
    result = payments.merge(min_files=1)  # every partition, even one with a single file
    print(
        f"merge (version {result.version}): {result.files_in} files -> {result.files_out}, "
        f"{result.entries_in} entries -> {result.entries_out}; files alive {before} -> "
        f"{len(payments.files())}"
    )
    show_ledger(payments, BALANCES)
    with raw_ledger(payments) as con:
        merged_total = con.sql("SELECT sum(dml_type * amount) FROM ledger").fetchall()[0][0]
    assert merged_total == ledger_total
    print("vacuum(grace=1 day) deletes nothing yet: every tombstone is younger than the grace")
    print(payments.vacuum(dt.timedelta(days=1)))
    print("(see docs/merges.md for policies, vacuum, drop_partitions and rewrite_partitions)")


if __name__ == "__main__":
    main()
