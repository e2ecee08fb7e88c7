"""The library's sub-packages are layers: a module imports only from its own package or from lower ones, and the
plumbing and the statistics never import torch (Snakemake imports the plumbing while it parses the workflow)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflow_run import REPO

PACKAGE = REPO / "curricula"
#: lowest first; ``cli`` is the top-level module curricula/cli.py
LAYERS = ("plumbing", "statistics", "data", "training", "models", "evaluation", "retrieval", "difficulty",
          "curriculum", "experiments", "active", "report", "study", "pipeline", "smoke", "cli")
TORCH_FREE = ("plumbing", "statistics")


def layer_of(module: str) -> str:
    """The layer of a dotted module name under ``curricula`` (``curricula.cli`` -> ``cli``)."""
    return module.split(".")[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``curricula`` module a file imports, at module level or inside a function: (line, dotted name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "curricula":
            names = [f"curricula.{a.name}" for a in node.names] if node.module == "curricula" else [node.module]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "curricula"]
    return found


def module_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


def test_every_module_sits_in_a_known_layer():
    for path in module_files():
        rel = path.relative_to(REPO).with_suffix("")
        assert layer_of(".".join(rel.parts)) in LAYERS, f"{path}: a package that is not a layer; add it to LAYERS"


def test_no_module_imports_a_higher_layer():
    climbs = []
    for path in module_files():
        own = LAYERS.index(layer_of(".".join(path.relative_to(REPO).with_suffix("").parts)))
        for line, name in imported_modules(path):
            if "." in name and LAYERS.index(layer_of(name)) > own:
                climbs.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert not climbs, "imports that climb the layers:\n" + "\n".join(climbs)


def test_layer_rule_sees_a_climb(tmp_path):
    """The check itself: a file that imports a higher layer is found (so the test above can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from curricula.study.grid import study_name\n")
    assert imported_modules(bad) == [(2, "curricula.study.grid")]
    assert LAYERS.index(layer_of("curricula.study.grid")) > LAYERS.index("plumbing")


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_plumbing_and_statistics_never_import_torch(layer):
    modules = [".".join(p.relative_to(REPO).with_suffix("").parts) for p in (PACKAGE / layer).rglob("*.py")]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m.removesuffix('.__init__'))\n"
            "print(sorted(m for m in ('torch', 'transformers', 'faiss', 'jnius') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"{layer} imports {out.stdout.strip()}"
