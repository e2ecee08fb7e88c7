"""The library's sub-packages are layers: a module imports only from its own package or from lower ones, and the
plumbing and the statistics never import torch (Snakemake imports the plumbing while it parses the workflow). The
package a user installs is the pipeline only: the tooling (``tools/``) and the analysis code (``analyses/``) import
``curricula``, never the reverse, and only ``curricula`` is installed."""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.workflow_run import REPO

PACKAGE = REPO / "curricula"
#: lowest first; ``plugins`` is the top-level module curricula/plugins.py (it imports nothing of the library; the
#: registries import it), ``cli`` the top-level module curricula/cli.py, ``stages`` the top of the library below it
#: (it may import every other layer, and only ``cli`` imports it); ``ecosystem`` (the PyTerrier and
#: sentence-transformers adapters) sits above them all: only a user's code and the tests import it, never the pipeline
LAYERS = ("plugins", "plumbing", "statistics", "data", "training", "models", "evaluation", "retrieval", "difficulty",
          "curriculum", "experiments", "active", "report", "study", "pipeline", "stages", "cli", "ecosystem")
TORCH_FREE = ("plugins", "plumbing", "statistics")
#: the folders beside the package that import it and that it must never import: the tooling and the analyses
OUTSIDE = ("tools", "analyses")


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


def outside_names() -> frozenset[str]:
    """The top-level module names that mean :data:`OUTSIDE` code: the folders themselves and the modules of
    ``analyses/`` (an analysis script imports the analysis code beside it by its bare name, ``from
    sequential_simulation import``)."""
    return frozenset({*OUTSIDE, *(p.stem for p in (REPO / "analyses").glob("*.py"))})


def outside_imports(path: Path, names: frozenset[str]) -> list[tuple[int, str]]:
    """Every import of a file, at module level or inside a function, whose top-level module is one of ``names``:
    (line, dotted name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, node.module)] if node.module.split(".")[0] in names else []
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in names]
    return found


def test_the_package_never_imports_the_tooling_or_the_analyses():
    names = outside_names()
    found = [f"{path.relative_to(REPO)}:{line} imports {name}" for path in module_files()
             for line, name in outside_imports(path, names)]
    assert not found, "the package imports code outside it (tools/, analyses/):\n" + "\n".join(found)


def test_outside_rule_sees_an_import_of_the_tooling(tmp_path):
    """The check itself: imports of ``tools``, of ``analyses`` and of an analysis module by its bare name are found,
    an import of ``curricula`` is not (so the test above can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import tools.locks\nfrom curricula.plumbing import locks\n\ndef f():\n"
                   "    from analyses.selection_noise_lib import Rule\n"
                   "    from sequential_simulation import simulate_family\n")
    assert outside_imports(bad, outside_names()) == [
        (1, "tools.locks"), (5, "analyses.selection_noise_lib"), (6, "sequential_simulation")]


def test_only_the_package_is_installed():
    """pyproject.toml's package discovery takes ``curricula`` and its sub-packages, not ``tools``, ``analyses``,
    ``tests`` or ``bench`` (folders of the repository, run from its root)."""
    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    include = found.get("include", ["*"])
    for package in ("curricula", "curricula.plumbing"):
        assert any(fnmatch.fnmatchcase(package, pattern) for pattern in include), f"{package} is not installed"
    for folder in (*OUTSIDE, "tests", "bench", "tools.smoke"):
        assert not any(fnmatch.fnmatchcase(folder, pattern) for pattern in include), f"{folder} would be installed"


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_plumbing_and_statistics_never_import_torch(layer):
    files = list((PACKAGE / layer).rglob("*.py")) or [PACKAGE / f"{layer}.py"]  # a package, or a top-level module
    modules = [".".join(p.relative_to(REPO).with_suffix("").parts) for p in files]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n    importlib.import_module(m.removesuffix('.__init__'))\n"
            "print(sorted(m for m in ('torch', 'transformers', 'faiss', 'jnius') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"{layer} imports {out.stdout.strip()}"
