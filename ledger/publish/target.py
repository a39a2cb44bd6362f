"""The Delta table a publish writes to, read with deltalake: the ledger version it records, and
the checks every Delta writer makes before writing (:func:`target_plan`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidArgumentError, MissingDependencyError, SchemaError
from ledger.publish.delta_types import delta_schema
from ledger.publish.plan import PublishPlan, publish_app_id, publish_plan, source_table
from ledger.rollup import Rollup
from ledger.table import Table

if TYPE_CHECKING:
    from deltalake import DeltaTable

# How a publish plans: publish_plan, or a front's own (views.publish passes the one it exports).
Planner = Callable[[Table | Rollup, int | None], PublishPlan]

_MISSING = "publishing to Delta Lake needs deltalake: pip install 'ledger-tables[delta]'"


def published_version(
    target: str | os.PathLike[str],
    source: Table | Rollup,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> int | None:
    """The ledger version of ``source`` the Delta table at ``target`` holds (None: there is no
    Delta table there, or it records no publish of ``source``).

    >>> published_version("/lake/payments", payments)   # doctest: +SKIP
    12
    """
    source_table(source)
    existing = open_target(target_uri(target), storage_options_of(storage_options))
    return None if existing is None else existing.transaction_version(publish_app_id(source))


def target_plan(
    source: Table | Rollup,
    target: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    planner: Planner = publish_plan,
) -> PublishPlan:
    """The :func:`publish_plan` for the Delta table at ``target`` as it is now, after the checks
    every Delta writer must make before writing: the target records publishes of ``source``
    (else :class:`InvalidArgumentError`) and has the view's columns (else :class:`SchemaError`).
    Nothing is written.

    >>> target_plan(payments, "/lake/payments").up_to_date  # doctest: +SKIP
    True
    """
    source_table(source)
    uri = target_uri(target)
    existing = open_target(uri, storage_options_of(storage_options))
    return checked_plan(source, uri, existing, planner)


def checked_plan(
    source: Table | Rollup,
    uri: str,
    existing: DeltaTable | None,
    planner: Planner = publish_plan,
) -> PublishPlan:
    """``planner``'s plan against ``existing`` (the Delta table at ``uri``, None: none yet),
    after the checks of :func:`target_plan`."""
    recorded = None
    if existing is not None:
        recorded = existing.transaction_version(publish_app_id(source))
        if recorded is None:
            raise InvalidArgumentError(other_source(existing, uri, source_table(source).name))
    plan = planner(source, recorded)
    if existing is not None:
        plan = dataclasses.replace(plan, new_columns=check_target_schema(existing, plan, uri))
    return plan


def target_uri(target: Any) -> str:
    """``target`` (a path or URI) as the URI string deltalake takes."""
    if isinstance(target, str | os.PathLike):
        uri = os.fspath(target)
        if isinstance(uri, str) and uri:
            return uri
    raise InvalidArgumentError(
        f"target must be the path or URI of a Delta table (e.g. 's3://lake/payments'), "
        f"got {target!r}"
    )


def storage_options_of(options: Any) -> dict[str, str] | None:
    """``storage_options`` checked: option names to strings (None stays None)."""
    if options is None:
        return None
    if not isinstance(options, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.items()
    ):
        raise InvalidArgumentError(
            "storage_options must map option names to strings, e.g. "
            '{"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}'
        )
    return dict(options)


def require_deltalake() -> None:
    """:class:`MissingDependencyError` naming the extra to install unless deltalake is there."""
    try:
        import deltalake  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(_MISSING) from e


def open_target(uri: str, options: dict[str, str] | None) -> DeltaTable | None:
    """The Delta table at ``uri`` (None: there is none yet)."""
    require_deltalake()
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return None
    return DeltaTable(uri, storage_options=options)


def other_source(existing: DeltaTable, uri: str, name: str) -> str:
    """Why a target holding no publish of ledger table ``name`` is refused, and what to do."""
    description = existing.metadata().description
    holds = f" (it says: {description!r})" if description else ""
    return (
        f"the Delta table at {uri} holds no publish of ledger table {name!r}{holds}: it was "
        "written by another source or another tool; publish to a new target, or delete it "
        "first"
    )


def check_target_schema(existing: DeltaTable, plan: PublishPlan, uri: str) -> tuple[str, ...]:
    """The published columns the target lacks (new columns of the source, which writers add);
    :class:`SchemaError` when a target column is not published any more or has another type
    (a widened column), which no append of columns can follow."""
    wanted = delta_schema(plan.schema)
    found = [(f.name, str(getattr(f.type, "type", f.type))) for f in existing.schema().fields]
    if not set(found) <= set(wanted):
        raise SchemaError(
            f"the Delta table at {uri} has columns {found}, but {plan.source_name!r} publishes "
            f"{wanted}; new columns are added to the target, but after a change of a column's "
            "type, publish to a new target (or delete it first)"
        )
    present = {name for name, _ in found}
    return tuple(name for name, _ in wanted if name not in present)
