"""Running a script of the repository (an example, the demo) the way ``python script.py`` does,
in the test process: a fresh interpreter would only import again the modules this one holds."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest


def run_as_script(path: Path, monkeypatch: pytest.MonkeyPatch, *arguments: str) -> None:
    """Run ``path`` as ``__main__`` with ``sys.argv`` set to ``[path, *arguments]`` and its
    folder first on ``sys.path``, as ``python path arguments...`` would; an exception it raises
    fails the test."""
    monkeypatch.setattr(sys, "argv", [str(path), *arguments])
    monkeypatch.syspath_prepend(str(path.parent))
    runpy.run_path(str(path), run_name="__main__")
