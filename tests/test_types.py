"""The type checker: mypy (pinned in requirements.lock) over the package as pyproject.toml's ``[tool.mypy]`` sets
it, strict on the typed run spec, the job runtime and the stage layer; no ``# type: ignore`` in the package."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.workflow_run import REPO


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


@pytest.mark.slow
def test_the_package_type_checks():
    out = mypy()
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


@pytest.mark.slow
def test_the_strict_settings_refuse_an_untyped_stage(tmp_path):
    """The check itself: an untyped function in a stage module fails it (so the test above can fail)."""
    stage = tmp_path / "curricula" / "stages"
    stage.mkdir(parents=True)
    (tmp_path / "curricula" / "__init__.py").write_text("")
    (stage / "__init__.py").write_text("")
    (stage / "bad.py").write_text("def stage(inputs, outputs):\n    return inputs\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
                          str(REPO / "pyproject.toml"), "curricula"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 1 and "no-untyped-def" in out.stdout, out.stdout


def test_no_type_ignores():
    found = [f"{path.relative_to(REPO)}:{i}" for path in sorted((REPO / "curricula").rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"#\s*type:\s*ignore", line)]
    assert not found, "'# type: ignore' comments; type the code instead:\n" + "\n".join(found)
