"""Merge policies: how a merge rewrites the entries of the files it compacts.

A table's policy is chosen at creation and stored in its log config as
``{"name": ..., **options}``. Part 1 of the project records and validates the choice; the
policies' merge queries arrive with the merge executor (see docs/concepts.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.errors import InvalidArgumentError

DEFAULT_POLICY = "collapsing"
POLICY_NAMES = ("collapsing", "replacing", "aggregating", "dedup", "custom")


def normalise_policy(policy: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The policy as stored in the log: ``{"name": ..., **options}``.

    >>> normalise_policy("replacing")
    {'name': 'replacing'}
    """
    if policy is None:
        return {"name": DEFAULT_POLICY}
    spec = {"name": policy} if isinstance(policy, str) else dict(policy)
    name = spec.get("name")
    if name not in POLICY_NAMES:
        raise InvalidArgumentError(
            f"unknown merge policy {name!r}; choose one of {list(POLICY_NAMES)}"
        )
    return spec
