"""Spark reads the ledger's S3 files through Hadoop's S3A connector, pointed at the store's own
endpoint and keys (per bucket), and answers exactly like pyarrow on the executors and DuckDB."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest

import ledger
import ledger.spark as ls
import views
from ledger.engines.spark import s3a
from ledger.storage.s3 import S3Store
from tests.conftest import Location
from tests.support.spark_s3a import require_s3a

SCHEMA = {"account": "VARCHAR", "region": "VARCHAR", "amount": "DECIMAL(12,2)", "x": "DOUBLE"}


def test_settings_point_one_bucket_at_the_stores_endpoint_and_keys() -> None:
    store = S3Store(
        "s3://books/warehouse",
        endpoint_url="http://127.0.0.1:9000",
        access_key_id="AKIA1",
        secret_access_key="s3cr3t",
        region="eu-west-1",
    )
    assert s3a.s3a_settings(store) == {
        "fs.s3a.bucket.books.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.bucket.books.path.style.access": "true",
        "fs.s3a.bucket.books.connection.ssl.enabled": "false",
        "fs.s3a.bucket.books.endpoint.region": "eu-west-1",
        "fs.s3a.bucket.books.access.key": "AKIA1",
        "fs.s3a.bucket.books.secret.key": "s3cr3t",
        "fs.s3a.bucket.books.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
    }


def test_session_tokens_use_the_temporary_provider_and_https_keeps_tls() -> None:
    store = S3Store(
        "s3://b",
        endpoint_url="https://minio.internal:9000",
        access_key_id="a",
        secret_access_key="s",
        session_token="t",
    )
    settings = s3a.s3a_settings(store)
    assert settings["fs.s3a.bucket.b.session.token"] == "t"
    assert settings["fs.s3a.bucket.b.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider"
    )
    assert settings["fs.s3a.bucket.b.connection.ssl.enabled"] == "true"
    assert settings["fs.s3a.bucket.b.endpoint.region"] == "us-east-1"


def test_a_store_on_aws_with_the_default_chain_sets_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No endpoint and no keys: Hadoop's own defaults (instance profile, environment) apply."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    assert s3a.s3a_settings(S3Store("s3://prod-bucket/wh")) == {}


def test_the_endpoint_and_region_of_the_environment_reach_s3a(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S3A gets the endpoint and region the store's own clients found in the environment."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    settings = s3a.s3a_settings(S3Store("s3://b/wh"))
    assert settings["fs.s3a.bucket.b.endpoint"] == "http://127.0.0.1:9001"
    assert settings["fs.s3a.bucket.b.endpoint.region"] == "eu-west-3"
    assert settings["fs.s3a.bucket.b.path.style.access"] == "true"


def _accounts(location: Location) -> ledger.Table:
    table = location.connect().create_table(
        "accounts", SCHEMA, primary_key="account", partition_by="region"
    )
    table.insert(
        [
            {"account": "A-1", "region": "eu", "amount": Decimal("10.25"), "x": 0.1},
            {"account": "A-2", "region": "eu", "amount": Decimal("-3.10"), "x": None},
            {"account": "Ä-3", "region": "us", "amount": Decimal("99.99"), "x": 2.5},
        ]
    )
    table.update([{"account": "A-1", "amount": Decimal("11.75")}])
    table.delete(["A-2"])
    return table


@pytest.mark.spark
@pytest.mark.parametrize("location", ["s3"], indirect=True)
def test_auto_reads_s3_through_s3a_with_the_stores_endpoint(
    spark: Any, location: Location, caplog: pytest.LogCaptureFixture
) -> None:
    require_s3a(spark)
    table = _accounts(location)
    want = sorted(tuple(r) for r in views.visible(table).fetchall())
    with caplog.at_level(logging.DEBUG, logger="ledger.engines.spark.s3a"):
        raw = ls.read(table, spark=spark)
        plan = raw._jdf.queryExecution().executedPlan().toString()
        assert "s3a://" in plan and "MapInArrow" not in plan
        got = sorted(tuple(r) for r in ls.visible(table, spark=spark).collect())
    assert (
        got == want == [("A-1", "eu", Decimal("11.75"), 0.1), ("Ä-3", "us", Decimal("99.99"), 2.5)]
    )
    bucket = S3Store(location.uri, **location.options).bucket
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    assert hadoop.get(f"fs.s3a.bucket.{bucket}.endpoint") == location.options["endpoint_url"]
    # The settings are logged for debugging, the keys never.
    secret = location.options["secret_access_key"]
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert secret not in logged.replace(location.uri, "")


@pytest.mark.spark
@pytest.mark.parametrize("location", ["s3"], indirect=True)
def test_s3a_and_pyarrow_readers_give_the_same_ledger_and_totals(
    spark: Any, location: Location
) -> None:
    require_s3a(spark)
    table = _accounts(location)
    ledgers = {
        reader: sorted(tuple(r) for r in ls.read(table, spark=spark, reader=reader).collect())
        for reader in ("s3a", "pyarrow", "auto")
    }
    assert ledgers["s3a"] == ledgers["pyarrow"] == ledgers["auto"]
    assert len(ledgers["s3a"]) == 6  # 3 insertions, a mark + insertion, a mark
    totals = {
        reader: [
            tuple(r) for r in ls.totals(table, spark=spark, reader=reader, sum="amount").collect()
        ]
        for reader in ("s3a", "pyarrow")
    }
    assert totals["s3a"] == totals["pyarrow"] == [(2, Decimal("111.74"))]


@pytest.mark.spark
def test_reader_names_are_checked_before_reading(spark: Any, tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1}])
    with pytest.raises(ledger.InvalidArgumentError, match="'auto', 'spark', 's3a', 'pyarrow'"):
        ls.read(table, spark=spark, reader="hadoop")
    with pytest.raises(ledger.InvalidArgumentError, match="S3 stores only"):
        ls.visible(table, spark=spark, reader="s3a")
    assert [tuple(r) for r in ls.visible(table, spark=spark, reader="spark").collect()] == [(1,)]
