"""S3 endpoints from the environment, and S3 options for ``s3://`` load sources.

Every S3 client (boto3 for the log, pyarrow for data files and sources) finds the endpoint,
region and credentials the same way: explicit options first, then the environment
(``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``). Sources of a local warehouse use the options
given to ``connect(..., source_options=...)``, else the environment.
"""

from __future__ import annotations

import io
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import InvalidArgumentError, StorageError
from ledger.storage.s3_settings import s3_settings
from tests.support.s3server import BUCKET, CREDENTIALS, S3Endpoint
from tests.test_cli import run_ledger

SCHEMA = {"id": "BIGINT", "v": "DECIMAL(10,2)"}
ROWS = [{"id": 1, "v": Decimal("1.10")}, {"id": 2, "v": Decimal("-2.50")}]


def _environment(monkeypatch: pytest.MonkeyPatch, endpoint: S3Endpoint, name: str) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"])
    monkeypatch.setenv("AWS_REGION", CREDENTIALS["region"])
    for other in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, endpoint.url)


def _visible(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table).fetchall())


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_a_warehouse_on_s3_reached_through_the_environment_reads_what_it_wrote(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    _environment(monkeypatch, s3_endpoint, variable)
    wh = ledger.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}")  # no endpoint_url=
    table = wh.create_table("t", SCHEMA, primary_key="id")
    table.insert(ROWS)
    assert _visible(table) == [(1, Decimal("1.10")), (2, Decimal("-2.50"))]
    table.update([{"id": 1, "v": "5"}])
    assert _visible(table) == [(1, Decimal("5.00")), (2, Decimal("-2.50"))]
    table.merge()
    assert _visible(table) == [(1, Decimal("5.00")), (2, Decimal("-2.50"))]


def test_a_missing_data_file_on_s3_is_a_storage_error(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _environment(monkeypatch, s3_endpoint, "AWS_ENDPOINT_URL")
    prefix = uuid.uuid4().hex
    table = ledger.connect(f"s3://{BUCKET}/{prefix}").create_table("t", SCHEMA, primary_key="id")
    table.insert(ROWS)
    for uri in table.files():
        s3_endpoint.client().delete_object(Bucket=BUCKET, Key=uri.split(f"{BUCKET}/", 1)[1])
    with pytest.raises(StorageError):
        views.rows(table)
    with pytest.raises(StorageError):
        table.to_arrow()
    with pytest.raises(StorageError):
        table.update([{"id": 1, "v": "5"}])
    warehouse = f"s3://{BUCKET}/{prefix}"
    for command in (["show", "t"], ["totals", "t", "--sum", "v"], ["sql", "SELECT * FROM t"]):
        result = run_ledger("-w", warehouse, *command, cwd=tmp_path, expect=1)
        assert result.stderr.startswith("Error: StorageError: "), (command, result.stderr)
        assert "could not be read" in result.stderr, (command, result.stderr)


# --- one resolution for every client -----------------------------------------------------------

_URLS = st.sampled_from(["http://127.0.0.1:1", "https://minio.example:9000", "http://r2.example"])


@given(explicit=st.none() | _URLS, s3=st.none() | _URLS, generic=st.none() | _URLS)
def test_the_endpoint_is_the_explicit_one_then_the_s3_variable_then_the_generic_one(
    explicit: str | None, s3: str | None, generic: str | None
) -> None:
    environment = {
        name: value
        for name, value in (("AWS_ENDPOINT_URL_S3", s3), ("AWS_ENDPOINT_URL", generic))
        if value is not None
    }
    options = {} if explicit is None else {"endpoint_url": explicit}
    expected = explicit or s3 or generic
    settings = s3_settings(options, environ=environment)
    assert settings.endpoint_url == expected
    boto_kwargs = settings.boto3_client_kwargs()
    assert boto_kwargs.get("endpoint_url") == expected
    fs_kwargs = settings.pyarrow_kwargs()
    if expected is None:
        assert "endpoint_override" not in fs_kwargs
    else:
        scheme, host = expected.split("://")
        assert (fs_kwargs["scheme"], fs_kwargs["endpoint_override"]) == (scheme, host)


def test_unknown_source_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="endpoint"):
        ledger.connect(str(tmp_path / "wh"), source_options={"endpoint": "http://x"})


# --- s3:// sources of a local warehouse --------------------------------------------------------


def _put_sources(endpoint: S3Endpoint) -> dict[str, str]:
    """The same rows as CSV, Parquet and JSON lines on S3; their URIs by format."""
    prefix = f"src/{uuid.uuid4().hex}"
    bodies = {
        "csv": b"id,v\n1,1.10\n2,-2.50\n",
        "json": "".join(
            json.dumps({"id": r["id"], "v": str(r["v"])}) + "\n" for r in ROWS
        ).encode(),
    }
    out = io.BytesIO()
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "v": pa.array([d["v"] for d in ROWS], pa.decimal128(10, 2)),
            }
        ),
        out,
    )
    bodies["parquet"] = out.getvalue()
    client = endpoint.client()
    uris = {}
    for fmt, body in bodies.items():
        key = f"{prefix}/rows.{fmt}"
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
        uris[fmt] = f"s3://{BUCKET}/{key}"
    return uris


def test_a_local_warehouse_loads_s3_sources_through_the_environment(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    uris = _put_sources(s3_endpoint)
    _environment(monkeypatch, s3_endpoint, "AWS_ENDPOINT_URL")
    wh = ledger.connect(str(tmp_path / "wh"))
    for fmt, uri in uris.items():
        table = wh.create_table(fmt, SCHEMA, primary_key="id")
        table.insert(uri)
        assert _visible(table) == [(1, Decimal("1.10")), (2, Decimal("-2.50"))], fmt


def test_a_local_warehouse_loads_s3_sources_with_source_options(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    uris = _put_sources(s3_endpoint)
    # The environment names another endpoint: the options given win.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    wh = ledger.connect(str(tmp_path / "wh"), source_options=s3_endpoint.options())
    for fmt, uri in uris.items():
        table = wh.create_table(fmt, SCHEMA, primary_key="id")
        table.upsert(uri)
        assert _visible(table) == [(1, Decimal("1.10")), (2, Decimal("-2.50"))], fmt


@pytest.mark.parametrize("through", ["flag", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
def test_the_cli_loads_s3_sources_into_a_local_warehouse(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, through: str
) -> None:
    uris = _put_sources(s3_endpoint)
    _environment(monkeypatch, s3_endpoint, "AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    flags: list[str] = []
    if through == "flag":
        flags = ["--endpoint-url", s3_endpoint.url]
    else:
        monkeypatch.setenv(through, s3_endpoint.url)
    wh = ledger.connect(str(tmp_path / "wh"))
    for fmt, uri in uris.items():
        table = wh.create_table(fmt, SCHEMA, primary_key="id")
        run_ledger("-w", "wh", *flags, "load", fmt, uri, cwd=tmp_path)
        assert _visible(table) == [(1, Decimal("1.10")), (2, Decimal("-2.50"))], fmt


def test_a_store_shipped_to_another_process_keeps_the_endpoint_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Executors of a distributed engine unpickle the store where the variables may be unset."""
    import pickle

    from ledger.storage.s3 import S3Store

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    store = S3Store("s3://b/wh")
    store.source_settings = s3_settings({"endpoint_url": "http://127.0.0.1:9001"})
    shipped = pickle.dumps(store)
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    copy = pickle.loads(shipped)
    assert (copy.settings.endpoint_url, copy.settings.region) == (
        "http://127.0.0.1:9000",
        "eu-west-3",
    )
    assert copy.source_settings == store.source_settings
