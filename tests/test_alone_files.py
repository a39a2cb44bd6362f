"""`make test` runs the tests marked ``alone`` in a second pytest run of their own, collecting only
the files the Makefile lists in ALONE_TESTS (collecting every file again would cost a minute). A
test marked ``alone`` in any other file would silently run in neither phase: these checks fail
first."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import RUN_ALONE

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def makefile_alone_files() -> set[str]:
    """The paths of ALONE_TESTS in the Makefile (its backslash continuations joined)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^ALONE_TESTS\s*:?=(.*)$", text, flags=re.MULTILINE)
    assert found is not None, "the Makefile defines no ALONE_TESTS"
    return set(found.group(1).split())


def test_the_alone_phase_runs_its_files_only():
    test_target = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not alone"' in test_target
    assert "-m alone $(ALONE_TESTS)" in test_target


def test_every_file_marked_alone_is_listed_in_the_makefile():
    listed = makefile_alone_files()
    assert all((ROOT / path).is_file() for path in listed), listed
    # conftest.py marks every test of these files `alone` ...
    assert {f"tests/{name}" for name in RUN_ALONE} <= listed
    # ... and a file may also mark its tests itself.
    marking = {
        f"tests/{path.relative_to(TESTS).as_posix()}"
        for path in TESTS.rglob("test_*.py")
        if path.name != Path(__file__).name
        and re.search(r"mark\s*\.\s*alone\b", path.read_text(encoding="utf-8"))
    }
    assert marking <= listed, f"marked alone but missing from ALONE_TESTS: {marking - listed}"
    # Only such files: any other would be collected for nothing.
    assert listed <= marking | {f"tests/{name}" for name in RUN_ALONE}
