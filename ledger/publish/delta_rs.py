"""Publishing with deltalake (delta-rs): the plan written as a new table, a full overwrite or one
Delta MERGE, in one commit that records the ledger version; a lost commit race starts again from
the version the winner recorded.

>>> publish_delta(payments, "s3://lake/payments", storage_options=opts)  # doctest: +SKIP
PublishResult(version=12, previous=9, rows_deleted=3, rows_inserted=4, ...)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ledger.errors import ConflictError
from ledger.publish.plan import (
    SOURCE_ALIAS,
    TARGET_ALIAS,
    PublishPlan,
    PublishResult,
    publish_plan,
    source_table,
)
from ledger.publish.target import (
    Planner,
    checked_plan,
    open_target,
    require_deltalake,
    storage_options_of,
    target_uri,
)
from ledger.rollup import Rollup
from ledger.table import Table

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

COMMIT_RETRIES = 5


def publish_delta(
    source: Table | Rollup,
    target: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    planner: Planner = publish_plan,
    logger: logging.Logger = log,
) -> PublishResult:
    """Publish the visible rows of a table, or the totals of a rollup, to the Delta Lake table
    at ``target`` (a path or URI; ``storage_options`` go to deltalake, e.g. S3 credentials).

    The first publish creates the Delta table; later ones merge what changed since the ledger
    version it holds, in one Delta commit that records the new version (application
    transaction ``ledger:<table uuid>``). At a version the Delta table already holds it does
    nothing (``skipped``); when the changes since then were vacuumed from the ledger it
    republishes in full (``full``). A rollup is published as it is: refresh it first.
    ``planner`` makes the plan and ``logger`` reports lost commit races: a public front passes
    its own, so that what it exports is what runs.

    Raises :class:`InvalidArgumentError` for a source that is not a Table or Rollup, or a
    target that holds something else than publishes of ``source``; :class:`SchemaError` for a
    target whose columns differ from the view's (after a schema change: publish to a new
    target) or a column type Delta cannot hold. Nothing is written then.

    >>> publish_delta(payments, "/lake/payments")                    # doctest: +SKIP
    PublishResult(version=3, previous=None, rows_deleted=0, rows_inserted=2, full=True, ...)
    """
    source_table(source)
    uri = target_uri(target)
    options = storage_options_of(storage_options)
    require_deltalake()
    from deltalake.exceptions import CommitFailedError

    for attempt in range(COMMIT_RETRIES):
        try:
            return _publish_once(source, uri, options, planner)
        except (CommitFailedError, _LostRace) as e:
            # Another publisher committed first: start again from what it recorded.
            logger.info("publish to %s lost a commit race (attempt %d): %s", uri, attempt + 1, e)
    raise ConflictError(
        f"publishing to {uri}: {COMMIT_RETRIES} Delta commits in a row lost a race with other "
        "writers; retry later"
    )


class _LostRace(Exception):
    """Another writer created the target first."""


def _publish_once(
    source: Table | Rollup, uri: str, options: dict[str, str] | None, planner: Planner
) -> PublishResult:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    existing = open_target(uri, options)
    plan = checked_plan(source, uri, existing, planner)
    if plan.up_to_date:
        return PublishResult(
            version=plan.previous if plan.previous is not None else plan.version,
            previous=plan.previous,
            rows_deleted=0,
            rows_inserted=0,
            full=False,
            skipped=True,
            base_version=plan.base_version,
            reason=plan.reason,
        )
    if existing is not None and plan.new_columns:
        _add_new_columns(existing, plan)
    properties = CommitProperties(
        custom_metadata=plan.commit_metadata(),
        app_transactions=[Transaction(plan.app_id, plan.version)],
    )
    # delta-rs retries a commit that lost its version to another writer when its conflict
    # check passes, and that check lets a second table creation through (committed as version
    # 1: every row twice). Full writes therefore never retry inside delta-rs: a lost commit
    # comes back here and starts again from the version the winner recorded.
    once = CommitProperties(
        custom_metadata=plan.commit_metadata(),
        max_commit_retries=0,
        app_transactions=[Transaction(plan.app_id, plan.version)],
    )
    if plan.full and existing is None:
        try:
            write_deltalake(
                uri,
                plan.rows,
                mode="error",
                name=plan.source_name,
                description=f"published from ledger table {plan.source_name!r} ({plan.app_id})",
                storage_options=options,
                commit_properties=once,
            )
        except CommitFailedError:
            raise
        except DeltaError:
            if open_target(uri, options) is None:
                raise
            # Another publisher created it first: start again from what it recorded.
            raise _LostRace(f"{uri} was created by another writer") from None
        deleted, inserted = 0, plan.rows.num_rows
        delta_version = DeltaTable(uri, storage_options=options).version()
    elif plan.full:
        assert existing is not None
        deleted, inserted = existing.count(), plan.rows.num_rows
        # In the target's column order: columns added since the first publish come last there.
        rows = plan.rows.select([f.name for f in existing.schema().fields])
        write_deltalake(existing, rows, mode="overwrite", commit_properties=once)
        delta_version = existing.version()
    else:
        assert existing is not None
        before = existing.version()
        metrics = (
            existing.merge(
                plan.merge_source(),
                plan.merge_condition(),
                source_alias=SOURCE_ALIAS,
                target_alias=TARGET_ALIAS,
                # Source statistics let delta-rs skip target files no changed key can be in.
                streamed_exec=False,
                commit_properties=properties,
            )
            .when_matched_delete()
            .when_not_matched_insert(plan.insert_values(), plan.insert_condition())
            .execute()
        )
        if existing.version() == before:
            # delta-rs commits nothing for a merge that changes no row (e.g. only ledger merges
            # since the last publish): record the version in an empty commit instead.
            existing.create_write_transaction(
                [], mode="append", schema=existing.schema(), commit_properties=properties
            )
            existing.update_incremental()
        deleted = int(metrics["num_target_rows_deleted"])
        inserted = int(metrics["num_target_rows_inserted"])
        delta_version = existing.version()
    return PublishResult(
        version=plan.version,
        previous=plan.previous,
        rows_deleted=deleted,
        rows_inserted=inserted,
        full=plan.full,
        skipped=False,
        delta_version=delta_version,
        base_version=plan.base_version,
        reason=plan.reason,
    )


def _add_new_columns(existing: DeltaTable, plan: PublishPlan) -> None:
    """Add the published columns the target lacks, in one Delta commit that changes no row
    (a crash after it leaves columns the next publish finds present)."""
    from deltalake import Field

    fields = [Field.from_arrow(plan.schema.field(name)) for name in plan.new_columns]
    existing.alter.add_columns(fields)
    existing.update_incremental()
