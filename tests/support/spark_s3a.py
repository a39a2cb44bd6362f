"""Spark through Hadoop's S3A connector in the tests: skip, naming the make target, where the
connector's jars were not fetched."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.engines.spark import jars, s3a


def require_s3a(spark: Any) -> None:
    """Skip the calling test unless hadoop-aws is on the session's classpath."""
    if not s3a.connector_present(spark):
        pytest.skip(
            f"Spark reads S3 through S3A only with hadoop-aws: {jars.missing_message('s3a')}"
        )
