"""Every test that uses Spark runs on one pytest-xdist worker; the others go one at a time.

`make test` runs ``pytest -n 2 --dist loadgroup``. Under pytest-xdist's plain schedulers each
worker that meets a Spark test starts a JVM of its own (two Spark sessions on two cores), and
``--dist loadfile`` lets one long file finish alone on one worker. Here the Spark tests form one
work unit, sent first (it is the largest), so one worker starts the run's only Spark session
while the other takes the remaining tests one at a time; whichever finishes first takes more.
The blocks of one document (tests/test_docs.py) are one work unit too, as each block first runs
the blocks before it that its worker has not run.

pytest-xdist's own ``loadgroup`` tags a grouped test by rewriting ``item._nodeid``, which pytest
9 no longer reads, so its ``xdist_group`` marks group nothing. Instead each worker writes the ids
of the Spark tests it collected to a folder the controller names, and the controller's scheduler
reads them when it splits the collection into work units.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

SPARK_GROUP = "spark"
_FOLDER_KEY = "ledger_spark_test_ids"


def uses_spark(item: pytest.Item) -> bool:
    """Marked ``spark`` (also through the ``engine`` axis), or asking for the session itself."""
    return item.get_closest_marker("spark") is not None or "spark" in getattr(
        item, "fixturenames", ()
    )


_DOC_BLOCK = "tests/test_docs.py::test_doc_block_runs_as_written["


def _documented_in(nodeid: str) -> str | None:
    """The document a doc-block test's id names (``docs/cli.md`` for ``...[docs/cli.md:206]``)."""
    if not nodeid.startswith(_DOC_BLOCK):
        return None
    return nodeid[len(_DOC_BLOCK) :].rsplit(":", 1)[0]


class SparkGroupScheduling(LoadGroupScheduling):
    """``loadgroup`` whose Spark tests are one work unit, named by the workers' id lists."""

    def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
        super().__init__(config, log)
        self._folder = folder
        self._spark_ids: frozenset[str] | None = None
        self._spark_documents: set[str | None] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._spark_ids is None:
            # Read once the workers have finished collecting (scheduling starts only then); their
            # collections are identical, so any one list serves.
            lists = sorted(self._folder.glob("*.ids"))
            self._spark_ids = frozenset(lists[0].read_text().splitlines() if lists else ())
        if nodeid in self._spark_ids:
            return SPARK_GROUP
        document = _documented_in(nodeid)
        if document is not None:
            # A doc block runs the blocks before it that its worker has not run yet: the blocks of
            # one file go to one worker, which runs each once (the file's Spark blocks take the
            # whole file to the Spark worker).
            if self._spark_documents is None:
                self._spark_documents = {_documented_in(spark) for spark in self._spark_ids}
            return SPARK_GROUP if document in self._spark_documents else f"doc:{document}"
        return str(super()._split_scope(nodeid))

    def remove_node(self, node: Any) -> str | None:
        """A worker that died mid-test: its test is reported failed once (pytest-xdist reports
        the returned id) and not sent again, where the plain scheduler sends it to the next
        worker, which it may kill too; the rest of the worker's work goes back to the queue."""
        workload: dict[str, dict[str, bool]] = self.assigned_work.pop(node)
        pending = (
            nodeid for unit in workload.values() for nodeid, done in unit.items() if not done
        )
        crashed = next(pending, None)
        if crashed is None:
            return None  # a worker that finished its work
        for scope, work_unit in workload.items():
            work_unit.pop(crashed, None)
            if not all(work_unit.values()):
                self.workqueue[scope] = work_unit
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed

    def _reschedule(self, node: Any) -> None:
        # A worker started in place of a dead one is known before its collection is: it gets
        # work from schedule() once the collection arrives, not before (pytest-xdist's own
        # scheduler looks the collection up and stops the run with a KeyError).
        if node in self.registered_collections:
            super()._reschedule(node)


class SparkOnOneWorker:
    """The pytest plugin: the controller's scheduler and folder, the workers' id lists."""

    def __init__(self) -> None:
        self._folder: Path | None = None

    def _ids_folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="ledger-spark-tests-"))
        return self._folder

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_FOLDER_KEY] = str(self._ids_folder())

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup":
            return None
        return SparkGroupScheduling(config, log, self._ids_folder())

    @pytest.hookimpl(trylast=True)  # after conftest has marked the Spark tests
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        worker_input: dict[str, Any] | None = getattr(config, "workerinput", None)
        if worker_input is None or _FOLDER_KEY not in worker_input:
            return
        folder = Path(worker_input[_FOLDER_KEY])
        ids = "\n".join(item.nodeid for item in items if uses_spark(item))
        partial = folder / f"{worker_input['workerid']}.partial"
        partial.write_text(ids)
        os.replace(partial, partial.with_suffix(".ids"))  # never read half written

    def pytest_unconfigure(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
