"""Publishing to Delta Lake through delta-spark.

The Delta Lake jars come from `make jars` (jvm/pom.xml) and go on the session's classpath through
`spark.jars`; where they were not fetched, the publishing tests skip with a message naming that
target. The `deltalake` path is tested in full in tests/test_publish.py.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import ledger
import ledger.spark as ls
import views
from ledger import jvm
from ledger.engines.spark import delta_available

NO_JARS = jvm.missing_message("delta")


def _table(tmp_path: Any) -> ledger.Table:
    wh = ledger.connect(str(tmp_path / "wh"))
    table = wh.create_table("t", {"k": "BIGINT", "x": "DOUBLE"}, primary_key="k")
    table.insert([{"k": k, "x": float(k)} for k in range(5)])
    return table


def test_publish_through_delta_spark_is_incremental_and_exactly_once(spark, tmp_path):
    if not delta_available(spark):
        pytest.skip(NO_JARS)
    from deltalake import DeltaTable

    table = _table(tmp_path)
    target = str(tmp_path / "delta")
    first = ls.publish_delta(table, target, spark=spark)
    assert first.full and not first.skipped
    table.update([{"k": 1, "x": 10.0}])
    table.delete([2])
    second = ls.publish_delta(table, target, spark=spark)
    assert not second.full and second.previous == first.version
    again = ls.publish_delta(table, target, spark=spark)
    assert again.skipped
    published = DeltaTable(target).to_pyarrow_table().sort_by("k")
    expected = views.visible(table).to_arrow_table().sort_by("k")
    assert published.to_pylist() == expected.to_pylist()


def test_publish_without_the_delta_jars_is_refused_before_anything_is_written(spark, tmp_path):
    if delta_available(spark):
        pytest.skip("the Delta Lake jars are on the classpath here")
    table = _table(tmp_path)
    target = str(tmp_path / "delta")
    with pytest.raises(ledger.MissingDependencyError, match="Delta Lake jars"):
        ls.publish_delta(table, target, spark=spark)
    assert not os.path.exists(target)
    # The embedded engine publishes the same table without Spark's jars.
    from deltalake import DeltaTable

    assert views.publish_delta(table, target).full
    published = DeltaTable(target).to_pyarrow_table().sort_by("k").to_pylist()
    assert published == views.visible(table).to_arrow_table().sort_by("k").to_pylist()
