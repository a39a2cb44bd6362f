"""Defaults users expect: vacuum's grace period, connect() that creates nothing until a write,
clear errors for missing buckets and files in the way, retries that let writers on one hot key
all finish, a one-line Snapshot repr, a catalog without internal relations, no-op commits
without a trx_id, and delete() errors that name the key forms it takes."""

from __future__ import annotations

import datetime as dt
import os
import threading
import uuid
from decimal import Decimal
from typing import Any

import pytest

import ledger
import views
from tests.conftest import Location
from tests.support.s3server import S3Endpoint


def _s3_keys(endpoint: S3Endpoint, bucket: str, prefix: str) -> list[str]:
    listed = endpoint.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", [])]


# --- vacuum ---------------------------------------------------------------------------------


def test_vacuum_keeps_a_week_by_default_and_says_so(location: Location) -> None:
    table = location.connect().create_table("t", {"id": "BIGINT", "v": "BIGINT"}, "id")
    table.insert([{"id": 1, "v": 1}])
    table.insert([{"id": 2, "v": 2}])
    table.merge()  # tombstones the two small files
    before_merge = table.version - 1
    result = table.vacuum()
    assert result.grace == dt.timedelta(days=7)
    assert result.data_files_deleted == 0
    # The version before the merge is still readable: its files are kept for a week.
    assert sorted(table.to_arrow(version=before_merge).column("id").to_pylist()) == [1, 2]
    assert table.vacuum(0).data_files_deleted == 2
    assert table.vacuum(dt.timedelta(hours=1)).grace == dt.timedelta(hours=1)
    assert sorted(table.to_arrow().column("id").to_pylist()) == [1, 2]


# --- connect and missing places ---------------------------------------------------------------


def test_connect_creates_no_folder_until_a_write(tmp_path: Any) -> None:
    path = tmp_path / "not" / "yet" / "warehouse"
    warehouse = ledger.connect(str(path))
    assert warehouse.tables() == []
    with pytest.raises(ledger.TableNotFoundError, match=str(path)):
        warehouse.table("payments")
    with pytest.raises(ledger.TableNotFoundError):
        warehouse.rollup("payments")
    assert not (tmp_path / "not").exists()
    table = warehouse.create_table("payments", {"id": "VARCHAR", "n": "BIGINT"}, "id")
    table.insert([{"id": "ü-1", "n": 1}])
    assert path.is_dir()
    assert ledger.connect(str(path)).table("payments").to_arrow().to_pylist() == [
        {"id": "ü-1", "n": 1}
    ]


def test_connect_on_s3_writes_nothing_until_a_write(s3_endpoint: S3Endpoint) -> None:
    from tests.support.s3server import BUCKET

    prefix = uuid.uuid4().hex
    warehouse = ledger.connect(f"s3://{BUCKET}/{prefix}", **s3_endpoint.options())
    assert warehouse.tables() == []
    with pytest.raises(ledger.TableNotFoundError, match=f"s3://{BUCKET}/{prefix}"):
        warehouse.table("payments")
    assert _s3_keys(s3_endpoint, BUCKET, prefix) == []
    warehouse.create_table("payments", {"id": "VARCHAR"}, "id").insert([{"id": "a"}])
    assert _s3_keys(s3_endpoint, BUCKET, prefix) != []


@pytest.mark.parametrize("below", [False, True])
def test_a_file_where_the_warehouse_folder_should_be_is_a_typed_error(
    tmp_path: Any, below: bool
) -> None:
    blocking = tmp_path / "notes.csv"
    blocking.write_text("a,b\n1,2\n")
    path = blocking / "warehouse" if below else blocking
    with pytest.raises(ledger.StorageError, match=r"notes\.csv is a file") as caught:
        ledger.connect(str(path))
    assert isinstance(caught.value, OSError)
    assert blocking.read_text() == "a,b\n1,2\n"


def test_a_missing_bucket_is_a_storage_error_naming_it(s3_endpoint: S3Endpoint) -> None:
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    warehouse = ledger.connect(f"s3://{bucket}/wh", **s3_endpoint.options())
    with pytest.raises(ledger.StorageError, match=bucket) as caught:
        warehouse.create_table("payments", {"id": "VARCHAR"}, "id")
    assert "does not exist" in str(caught.value)
    with pytest.raises(ledger.StorageError, match=bucket):
        warehouse.tables()
    with pytest.raises(ledger.StorageError, match=bucket):
        warehouse.table("payments")
    names = [b["Name"] for b in s3_endpoint.client().list_buckets()["Buckets"]]
    assert bucket not in names


# --- retries ----------------------------------------------------------------------------------


def test_writers_on_one_hot_key_all_finish(location: Location) -> None:
    table = location.connect().create_table("counter", {"id": "VARCHAR", "n": "BIGINT"}, "id")
    table.insert([{"id": "hot", "n": 0}])
    writers = 8
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def increment(tx: ledger.Transaction) -> None:
        current = tx.lookup(["hot"]).column("n")[0].as_py()
        tx.upsert([{"id": "hot", "n": current + 1}])

    def writer() -> None:
        handle = location.connect().table("counter")
        start.wait()
        try:
            handle.retrying(increment)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert table.to_arrow().to_pylist() == [{"id": "hot", "n": writers}]
    increments = [r for r in table.history() if r.operation == "upsert"]
    assert len(increments) == writers  # each writer committed exactly once


# --- what users see ---------------------------------------------------------------------------


def test_snapshot_repr_is_one_line(local_location: Location) -> None:
    table = local_location.connect().create_table("t", {"id": "BIGINT"}, "id")
    table.insert([{"id": i} for i in range(5)])
    shown = repr(table.snapshot())
    assert "\n" not in shown and len(shown) < 200
    assert "version=1" in shown and "rows=5" in shown and "'t'" in shown


def test_the_catalog_lists_only_tables_and_their_ledgers(location: Location) -> None:
    warehouse = location.connect()
    orders = warehouse.create_table("orders", {"id": "BIGINT", "amount": "DECIMAL(9,2)"}, "id")
    orders.insert([{"id": 1, "amount": Decimal("0.10")}, {"id": 2, "amount": Decimal("0.20")}])
    orders.delete([2])
    warehouse.create_table("empty", {"id": "BIGINT"}, "id")
    con = views.connect(warehouse)
    listed = sorted(name for (name,) in con.sql("SHOW TABLES").fetchall())
    assert listed == ["empty", "empty_ledger", "orders", "orders_ledger"]
    assert con.sql("SELECT id, amount FROM orders").fetchall() == [(1, Decimal("0.10"))]
    assert con.sql("SELECT sum(dml_type * amount) FROM orders_ledger").fetchall() == [
        (Decimal("0.10"),)
    ]
    views.register(con, warehouse)  # registering again replaces, still nothing internal
    assert sorted(name for (name,) in con.sql("SHOW TABLES").fetchall()) == listed


# --- commits and keys -------------------------------------------------------------------------


def test_a_commit_with_nothing_to_do_carries_no_trx_id(local_location: Location) -> None:
    table = local_location.connect().create_table("t", {"id": "BIGINT"}, "id")
    assert table.insert([]) == ledger.CommitInfo(None, None, 0, 0)
    assert table.delete([42]) == ledger.CommitInfo(None, None, 0, 0)
    table.insert([{"id": 1}], app_id="loader", batch=1)
    assert table.insert([{"id": 1}], app_id="loader", batch=1).trx_id is None
    assert table.version == 1


@pytest.mark.parametrize("keys", [5, 2.5, Decimal("1.5"), {1, 2}, (1, 2), object()])
def test_delete_names_the_key_forms_it_takes(local_location: Location, keys: Any) -> None:
    table = local_location.connect().create_table("t", {"id": "BIGINT"}, "id")
    table.insert([{"id": 5}])
    with pytest.raises(ledger.InvalidArgumentError) as caught:
        table.delete(keys)
    message = str(caught.value)
    assert "list of key values" in message and "['id']" in message
    assert "DuckDB relation" not in message and "RecordBatchReader" not in message
    assert table.to_arrow().to_pylist() == [{"id": 5}]
    assert table.version == 1


def test_keys_given_in_the_documented_forms_are_deleted(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"region": "VARCHAR", "id": "BIGINT"}, ["region", "id"]
    )
    table.insert([{"region": r, "id": i} for r in ("eu", "us") for i in range(3)])
    table.delete([("eu", 0)])
    table.delete([{"region": "us", "id": 1}])
    table.delete(os.fspath(_keys_file(local_location, "us", 2)))
    left = sorted((r["region"], r["id"]) for r in table.to_arrow().to_pylist())
    assert left == [("eu", 1), ("eu", 2), ("us", 0)]


def _keys_file(location: Location, region: str, key: int) -> Any:
    path = os.path.join(os.path.dirname(location.uri), "keys.csv")
    with open(path, "w") as f:
        f.write(f"region,id\n{region},{key}\n")
    return path


def test_a_warehouse_opens_at_a_pathlib_path(tmp_path) -> None:
    table = ledger.connect(tmp_path / "wh").create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    assert views.visible(ledger.connect(str(tmp_path / "wh")).table("t")).fetchall() == [(1,)]
