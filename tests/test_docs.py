"""The README example and the demo run as documented (docs stay in step with the code)."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_prints_what_its_comments_say(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    lines = code.splitlines()
    totals_comment = next(line for line in lines if line.startswith("# ["))
    count_comment = next(line for line in lines if "from the log alone:" in line)
    assert printed == [totals_comment[2:], count_comment.rsplit(": ", 1)[1]]


def test_the_demo_runs_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), str(tmp_path / "wh")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "history()" in result.stdout and "time travel" in result.stdout
    assert "merge (version" in result.stdout
    assert (tmp_path / "wh" / "payments" / "_log" / "00000000000000000000.jsonl").exists()
