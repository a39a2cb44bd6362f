"""Choosing what to merge, the way IceDB does: small files, per partition, in partition order.

Files under ``max_file_size`` bytes are candidates; each partition merges up to ``max_files`` of
them (the smallest first) when it has at least ``min_files``. Partitions are taken in ascending
or descending order of their path, so a frequent small merge can keep the newest partitions tidy
(``descending`` with time partitions) while a slow large one works through old ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ledger.errors import InvalidArgumentError
from ledger.log.entries import FileMarker
from ledger.log.state import TableState
from ledger.partitioning import PartitionSpec
from ledger.pruning import prune_by_partitions
from ledger.snapshot import PartitionFilter

DEFAULT_MAX_FILE_SIZE = 256 * 1024 * 1024
DEFAULT_MAX_FILES = 1000
ORDERS = ("ascending", "descending")


@dataclass(frozen=True)
class PartitionPlan:
    """The files of one partition that one merge rewrites."""

    partition: dict[str, str | None]
    folder: str
    inputs: tuple[FileMarker, ...]
    covers_partition: bool  # every alive file of the partition is an input

    @property
    def entries(self) -> int:
        return sum(m.rows for m in self.inputs)


def plan_merge(
    state: TableState,
    *,
    partitions: PartitionFilter = None,
    files: Sequence[str] | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    max_files: int = DEFAULT_MAX_FILES,
    min_files: int = 2,
    order: str = "ascending",
    max_partitions: int | None = None,
    unchanged: Callable[[FileMarker], bool] | None = None,
) -> list[PartitionPlan]:
    """The partitions to merge and their input files, in merge order. A partition whose one
    input is a file the merge would return as it is (``unchanged``: the policy's answer for it)
    is left out: it has nothing to merge."""
    if order not in ORDERS:
        raise InvalidArgumentError(f"order must be one of {list(ORDERS)}, got {order!r}")
    for name, value, least in (
        ("max_file_size", max_file_size, 1),
        ("max_files", max_files, 2),
        ("min_files", min_files, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InvalidArgumentError(f"{name} must be an integer >= {least}, got {value!r}")
    if max_partitions is not None and (
        not isinstance(max_partitions, int)
        or isinstance(max_partitions, bool)
        or max_partitions < 1
    ):
        raise InvalidArgumentError(
            f"max_partitions must be a positive integer, got {max_partitions!r}"
        )
    spec = PartitionSpec.parse(list(state.config.partition_by), state.schema)
    alive = state.alive_files
    by_folder: dict[str, list[FileMarker]] = {}
    for marker in alive:
        by_folder.setdefault(spec.path(marker.partition), []).append(marker)
    if files is not None:
        if partitions is not None:
            raise InvalidArgumentError("pass files or partitions, not both")
        if isinstance(files, str):
            raise InvalidArgumentError("files must be a list of paths, not one string")
        wanted = set(files)
        known = {m.path for m in alive}
        unknown = sorted(wanted - known)
        if unknown:
            raise InvalidArgumentError(
                f"files {unknown[:3]} are not alive data files of the table (paths relative to "
                "the table, as in Snapshot.markers())"
            )
        chosen = [m for m in alive if m.path in wanted]
        min_files, max_files = 1, len(chosen) + 2
    else:
        chosen = (
            alive
            if partitions is None
            else prune_by_partitions(alive, spec.normalise_filter(partitions))
        )
        chosen = [m for m in chosen if m.size < max_file_size]
    candidates: dict[str, list[FileMarker]] = {}
    for marker in chosen:
        candidates.setdefault(spec.path(marker.partition), []).append(marker)
    plans = []
    for folder in sorted(candidates, reverse=order == "descending"):
        inputs = sorted(candidates[folder], key=lambda m: (m.size, m.path))[:max_files]
        if len(inputs) < min_files:
            continue
        if len(inputs) == 1 and files is None and unchanged is not None and unchanged(inputs[0]):
            continue
        plans.append(
            PartitionPlan(
                partition=dict(inputs[0].partition),
                folder=folder,
                inputs=tuple(sorted(inputs, key=lambda m: m.path)),
                covers_partition=len(inputs) == len(by_folder[folder]),
            )
        )
        if max_partitions is not None and len(plans) >= max_partitions:
            break
    return plans
