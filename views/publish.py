"""Publishing a ledger view to a Delta Lake table, incrementally and exactly once: the public
front of ``ledger.publish`` (the plan, the target's checks, the deltalake writer live there).

What is published: the visible rows of a table (:func:`views.visible`; ``_row_id`` too for
tables without a primary key), or the totals of a rollup. The first publish creates the Delta
table; each later one merges the current rows of the keys changed since the ledger version the
Delta table records, in one Delta commit that records the new version (docs/views.md, section
8, has the whole design).

:func:`publish_plan` is everything that does not depend on the Delta writer, so that an engine
writing Delta itself (delta-spark's ``DeltaTable.merge``) follows the same rules.

>>> views.publish_delta(payments, "s3://lake/payments", storage_options=opts)  # doctest: +SKIP
PublishResult(version=12, previous=9, rows_deleted=3, rows_inserted=4, ...)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from ledger.publish import delta_rs
from ledger.publish.delta_rs import COMMIT_RETRIES
from ledger.publish.delta_types import delta_schema, published_schema
from ledger.publish.plan import (
    APP_PREFIX,
    DELETE,
    INSERT,
    SOURCE_ALIAS,
    TARGET_ALIAS,
    WRITER_DIALECTS,
    PublishPlan,
    PublishResult,
    publish_app_id,
    publish_plan,
)
from ledger.publish.target import published_version, target_plan
from ledger.rollup import Rollup
from ledger.sql.names import ACTION
from ledger.table import Table

__all__ = [
    "ACTION",
    "APP_PREFIX",
    "COMMIT_RETRIES",
    "DELETE",
    "INSERT",
    "SOURCE_ALIAS",
    "TARGET_ALIAS",
    "WRITER_DIALECTS",
    "PublishPlan",
    "PublishResult",
    "delta_schema",
    "publish_app_id",
    "publish_delta",
    "publish_plan",
    "published_schema",
    "published_version",
    "target_plan",
]

log = logging.getLogger(__name__)


def publish_delta(
    source: Table | Rollup,
    target: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
) -> PublishResult:
    """Publish the visible rows of a table, or the totals of a rollup, to the Delta Lake table
    at ``target`` with deltalake, incrementally and exactly once (``storage_options`` go to
    deltalake, e.g. S3 credentials): :func:`ledger.publish.delta_rs.publish_delta` says what
    it writes, when it skips or republishes in full, and which typed errors it raises before
    anything is written.

    >>> views.publish_delta(payments, "/lake/payments")              # doctest: +SKIP
    PublishResult(version=3, previous=None, rows_deleted=0, rows_inserted=2, full=True, ...)
    """
    # This module's publish_plan and logger, looked up at each call: the names it exports are
    # the ones that run (a caller wrapping views.publish.publish_plan wraps what publishes).
    return delta_rs.publish_delta(
        source, target, storage_options=storage_options, planner=publish_plan, logger=log
    )
