"""A warehouse on S3 is found as a local one is: ``ledger init`` marks the prefix, and every
other command refuses a prefix holding neither that mark nor a table (a mistyped prefix), where
it would otherwise read an empty warehouse or start a new one."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import ledger
from ledger.warehouse import WAREHOUSE_MARKER
from tests.support.s3server import BUCKET, CREDENTIALS
from tests.test_cli import as_json, run_ledger

ENV = {
    "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
    "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
    "AWS_DEFAULT_REGION": CREDENTIALS["region"],
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _keys(s3_endpoint: Any, prefix: str) -> list[str]:
    listed = s3_endpoint.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/")
    return [item["Key"] for item in listed.get("Contents", [])]


def test_a_mistyped_s3_prefix_is_an_error_as_a_mistyped_folder_is(
    tmp_path: Path, s3_endpoint: Any
) -> None:
    name = uuid.uuid4().hex
    uri = f"s3://{BUCKET}/{name}"
    s3 = ["--endpoint-url", s3_endpoint.url, "-w", uri]
    for command in (["tables"], ["create", "x", "--schema", "id BIGINT", "--key", "id"]):
        refused = run_ledger(*s3, *command, cwd=tmp_path, env=ENV, expect=1)
        assert f"no warehouse at {uri!r}" in refused.stderr, refused.stderr
        assert "ledger init" in refused.stderr and refused.stderr.count("\n") == 1
    local = run_ledger("-w", "./nonexist_wh", "tables", cwd=tmp_path, expect=1)
    assert "no warehouse at './nonexist_wh'" in local.stderr
    assert _keys(s3_endpoint, name) == []  # nothing written, no table begun

    made = as_json(run_ledger(*s3, "init", "--json", cwd=tmp_path, env=ENV))
    assert made["tables"] == 0
    assert _keys(s3_endpoint, name) == [f"{name}/{WAREHOUSE_MARKER}"]
    marker = s3_endpoint.client().get_object(Bucket=BUCKET, Key=f"{name}/{WAREHOUSE_MARKER}")
    assert json.loads(marker["Body"].read())["v"] == 1
    assert as_json(run_ledger(*s3, "tables", "--json", cwd=tmp_path, env=ENV)) == []
    run_ledger(*s3, "create", "x", "--schema", "id BIGINT", "--key", "id", cwd=tmp_path, env=ENV)
    run_ledger(*s3, "init", cwd=tmp_path, env=ENV)  # again: safe, the marker is kept
    listed = as_json(run_ledger(*s3, "tables", "--json", cwd=tmp_path, env=ENV))
    assert [row["table"] for row in listed] == ["x"]


def test_an_s3_warehouse_made_without_the_marker_keeps_working(
    tmp_path: Path, s3_endpoint: Any
) -> None:
    name = uuid.uuid4().hex
    uri = f"s3://{BUCKET}/{name}"
    # Python opens any prefix, marked or not, as it opens any local folder: reading an empty
    # one finds no table, and a table it creates starts the warehouse.
    warehouse = ledger.connect(uri, **s3_endpoint.options())
    assert warehouse.tables() == []
    assert ledger.connect(str(tmp_path / "nonexist"), **{}).tables() == []
    warehouse.create_table("old", {"id": "BIGINT"}, primary_key="id").insert([{"id": 1}])
    assert not any(key.endswith(WAREHOUSE_MARKER) for key in _keys(s3_endpoint, name))
    s3 = ["--endpoint-url", s3_endpoint.url, "-w", uri]
    listed = as_json(run_ledger(*s3, "tables", "--json", cwd=tmp_path, env=ENV))
    assert [(row["table"], row["live_entries"]) for row in listed] == [("old", 1)]
