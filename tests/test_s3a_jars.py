"""The S3A jar group (`make jars-s3a`) holds hadoop-aws and only the AWS SDK modules it loads:
small enough for `make test` to fetch, and no second copy of a library PySpark ships."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.engines.spark import jars as jvm

MAX_S3A_BYTES = 50 * 1024 * 1024


def _artifact(jar: Path) -> str:
    """``netty-handler-4.2.13.Final.jar`` -> ``netty-handler``."""
    return re.sub(r"-\d[\w.\-]*$", "", jar.stem)


@pytest.fixture
def s3a_jars() -> list[Path]:
    jars = jvm.group_jars("s3a")
    if not jars:
        pytest.skip(jvm.missing_message("s3a"))
    return jars


def test_the_s3a_group_is_small_and_has_no_sdk_bundle(s3a_jars: list[Path]) -> None:
    names = {_artifact(j) for j in s3a_jars}
    assert {"hadoop-aws", "s3", "sts", "s3-transfer-manager"} <= names
    assert "bundle" not in names
    assert sum(j.stat().st_size for j in s3a_jars) < MAX_S3A_BYTES


def test_the_s3a_group_repeats_no_library_pyspark_ships(s3a_jars: list[Path]) -> None:
    import pyspark

    shipped = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert "hadoop-client-api" in shipped  # the folder was found
    assert {_artifact(j) for j in s3a_jars} & shipped == set()
