"""Merge policies: how a merge rewrites the entries of the files it compacts.

A table's policy is chosen at creation and stored in its log config as ``{"name": ..., **options}``.
Each policy is one module (``collapsing``, ``replacing``, ``aggregating``, ``dedup``, ``custom``)
with a ``build(options, schema, config)`` that validates the options and returns an object whose
``merge_sql(context)`` is the query from the merged entries to their replacement (see
:mod:`merge_policies.base`). Modules are imported when first used.

>>> normalise_policy("replacing")
{'name': 'replacing'}
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidArgumentError

if TYPE_CHECKING:
    from ledger.log.entries import TableConfig
    from ledger.schema import TableSchema
    from merge_policies.base import MergePolicy

DEFAULT_POLICY = "collapsing"
POLICY_MODULES = {
    "collapsing": "merge_policies.collapsing",
    "replacing": "merge_policies.replacing",
    "aggregating": "merge_policies.aggregating",
    "dedup": "merge_policies.dedup",
    "custom": "merge_policies.custom",
}
POLICY_NAMES = tuple(POLICY_MODULES)


def normalise_policy(policy: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The policy as stored in the log: ``{"name": ..., **options}``.

    >>> normalise_policy({"name": "dedup", "dedup_key": ["event_id"]})
    {'name': 'dedup', 'dedup_key': ['event_id']}
    """
    if policy is None:
        return {"name": DEFAULT_POLICY}
    if not isinstance(policy, str | Mapping):
        raise InvalidArgumentError(
            f"policy must be a name or a mapping with a 'name', got {type(policy).__name__}"
        )
    spec = {"name": policy} if isinstance(policy, str) else dict(policy)
    name = spec.get("name")
    if name not in POLICY_MODULES:
        raise InvalidArgumentError(
            f"unknown merge policy {name!r}; choose one of {list(POLICY_NAMES)}"
        )
    return spec


def load_policy(spec: Mapping[str, Any], schema: TableSchema, config: TableConfig) -> MergePolicy:
    """The policy ``spec`` describes, its options checked against the table.

    Raises :class:`~ledger.errors.InvalidArgumentError` for an unknown policy or option, or a
    policy that cannot be valid for the table (e.g. ``min`` on a table with delete marks).
    """
    normalised = normalise_policy(spec)
    name = normalised.pop("name")
    module = importlib.import_module(POLICY_MODULES[name])
    policy: MergePolicy = module.build(normalised, schema, config)
    return policy
