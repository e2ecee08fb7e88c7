"""The documentation: every link and file reference of README.md, configs/README.md and docs/*.md resolves, and so
does every Sphinx reference in the code's docstrings and comments (tools/doc_links.py, tools/code_refs.py), and
docs/config-reference.md is the page the config schema generates (tools/config_reference.py)."""

from pathlib import Path

import pytest

from tools import config_reference, doc_links

REPO = Path(__file__).resolve().parents[1]


def test_every_link_and_file_reference_in_the_docs_resolves():
    problems = doc_links.check_docs(REPO)
    assert not problems, "broken references in the docs (page:line: reference: why):\n" + "\n".join(
        map(str, problems))


def test_every_sphinx_reference_in_the_code_resolves():
    problems = doc_links.check_sources(REPO)
    assert not problems, "broken :func:/:class:/:mod:/... references in the code (file:line: target: why):\n" + (
        "\n".join(map(str, problems)))


def test_readme_fits_one_screen_and_leads_with_what_a_newcomer_needs():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail onto a docs/ page"
    first = "\n".join(lines[:150])
    for what, text in [("the run command", "make run "), ("the test command", "make test "),
                       ("where the results land", "results/<dataset>/"), ("another dataset", "--configfile"),
                       ("SLURM", "--profile profiles/slurm")]:
        assert text in first, f"README.md's first 150 lines do not show {what} ({text!r})"


def test_doc_pages_wrap_prose_at_120_columns():
    long = [f"{page.relative_to(REPO)}:{i}" for page in doc_links.doc_pages(REPO)
            for i, line in enumerate(doc_links.blank_fences(page.read_text(encoding="utf-8")).split("\n"), 1)
            if len(line) > 120 and not line.startswith(("|", "#"))]
    assert not long, f"prose lines over 120 columns: {long}"


def test_config_reference_page_is_generated_from_the_current_schema():
    page = REPO / "docs" / "config-reference.md"
    expected = config_reference.render(config_reference.load_schema())
    assert page.read_text(encoding="utf-8") == expected, (
        f"docs/config-reference.md is stale: regenerate it with `{config_reference.COMMAND}` after editing "
        "schemas/config.schema.yaml")


def test_every_key_of_the_schema_has_a_description():
    missing = config_reference.undocumented(config_reference.load_schema())
    assert not missing, f"schemas/config.schema.yaml: keys without a description: {missing}"


def test_config_reference_lists_every_key_with_type_default_and_condition():
    schema = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "object", "default": {}, "description": "section a", "properties": {
            "k": {"type": ["integer", "null"], "minimum": 1, "default": None, "description": "a knob"},
            "mode": {"enum": ["x", "y"], "default": "x", "description": "the mode"},
            "m": {"type": "object", "description": "a map",
                  "additionalProperties": {"type": "string", "description": "an entry"}}},
            "allOf": [{"if": {"properties": {"mode": {"const": "y"}}},
                       "then": {"properties": {"m": {"properties": {"only_y": {"type": "boolean",
                                                                              "description": "y's own"}}}}}}]}}}
    rows = {e.key: e for e in config_reference.entries(schema["properties"]["a"], "a", required=True)}
    assert list(rows) == ["a", "a.k", "a.mode", "a.m", "a.m.<name>", "a.m.only_y"]
    assert rows["a"].kind == "mapping, required" and rows["a"].default == "{}"
    assert rows["a.k"].kind == "integer or null, ≥ 1" and rows["a.k"].default == "null"
    assert rows["a.mode"].kind == "one of `x`, `y`" and rows["a.m"].default is None
    assert rows["a.m.only_y"].condition == "`a.mode` is `y`"
    page = config_reference.render(schema)
    assert "- **`a.m.only_y`** (when `a.mode` is `y`): boolean; no default. y's own" in page
    assert all(len(line) <= config_reference.WIDTH for line in page.splitlines())


def test_config_reference_wrap_never_starts_a_line_with_a_list_marker():
    text = "word " * 23 + "(1 - D) and more words after it"
    lines = config_reference.wrap(text, "- ", "  ")
    assert all(not line[2:].startswith("- ") for line in lines[1:]), lines
    assert " ".join(line[2:] for line in lines) == " ".join(text.split())


def test_config_reference_check_fails_on_a_stale_page(tmp_path, capsys):
    out = tmp_path / "page.md"
    assert config_reference.main(["--out", str(out)]) == 0
    assert config_reference.main(["--check", "--out", str(out)]) == 0
    out.write_text(out.read_text() + "edited by hand\n")
    assert config_reference.main(["--check", "--out", str(out)]) == 1
    assert "python -m tools.config_reference" in capsys.readouterr().err


@pytest.fixture()
def tiny_repo(tmp_path):
    """A repository with one module, one test file and a docs page to break."""
    (tmp_path / "pkg").mkdir()
    module = "X = 1\n\nclass C:\n    def m(self):\n        pass\n\ndef f():\n    pass\n"
    (tmp_path / "pkg" / "mod.py").write_text(module)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## A section\n\ntext\n")
    files = ["pkg/mod.py", "tests/test_a.py", "docs/page.md", "README.md"]
    return tmp_path, files


def check(repo: Path, files: list[str], readme: str) -> list[str]:
    (repo / "README.md").write_text(readme)
    return [str(p) for p in doc_links.check_docs(repo, files)]


def test_link_check_passes_good_references(tiny_repo):
    repo, files = tiny_repo
    readme = ("# R\n\n[page](docs/page.md), [section](docs/page.md#a-section), [self](#r), `pkg/mod.py`,\n"
              "`pkg/mod.py:f`, `pkg/mod.py:C.m`, `pkg/mod.py:X`, `tests/test_a.py::test_one[x]`, `mod.py:f`,\n"
              "`make run ARGS=\"--configfile pkg/mod.py\"`, `results/<dataset>/report/table.md`, `logs/x/y.log`,\n"
              "`/tmp/out`, `../shared/data`, `report/table_{a,b}.md`, `dense/neighbors.parquet`, `SMN_MSN/x.py:f`,\n"
              "`git show abc:README.md`, [web](https://example.org/x.md), `curricula.nothing` is no repo module.\n"
              "```\nnot/checked.py in a fence\n```\n")
    assert check(repo, files, readme) == ["README.md:7: curricula.nothing: no module curricula in the repository"]


@pytest.mark.parametrize("ref, why", [
    ("[gone](docs/missing.md)", "no file docs/missing.md"),
    ("[anchor](docs/page.md#no-such-section)", "no heading with anchor #no-such-section in docs/page.md"),
    ("[self](#nowhere)", "no heading with anchor #nowhere in README.md"),
    ("`pkg/missing.py`", "no file or folder pkg/missing.py in the repository"),
    ("`absent.yaml`", "no repository file is named absent.yaml"),
    ("`pkg/mod.py:g`", "g is not defined in the module"),
    ("`pkg/mod.py:C.n`", "C.n is not defined in class C"),
    ("`pkg/mod.py:f.x`", "f is no class, so it has no x"),
    ("`tests/test_a.py::test_two`", "test_two is not defined in the module"),
    ("`pkg/only=x/`", "no file or folder pkg/only=x in the repository"),  # one path, = and all
])
def test_link_check_names_page_line_and_reference_of_each_broken_one(tiny_repo, ref, why):
    repo, files = tiny_repo
    problems = check(repo, files, f"# R\n\nfine line\nthen {ref} here\n")
    assert len(problems) == 1 and problems[0].startswith("README.md:4: ") and why in problems[0], problems


#: a module of a tiny repository, its references good and bad (the bad ones on the lines CODE_PROBLEMS names)
CODE = '''"""A module: :func:`curricula.mod.f`, :func:`~curricula.mod.f`, :class:`curricula.mod.C`, :meth:`C.m`,
:attr:`C.x`, :mod:`ast`, :class:`Path`, :func:`f`, :func:`other.g`, :data:`X`, :func:`curricula.mod.
f` wrapped, :func:`budget`, :class:`int`, :func:`np.sum`.
:func:`curricula.mod.gone`
:meth:`C.gone`
:func:`budget_of_old`
:func:`curricula.mod.g`
"""
from pathlib import Path

import numpy as np

from curricula.other import g

X = 1


class C:
    """:meth:`m` and :meth:`flush` (a method's own class)."""

    def m(self):
        self.x = 1

    def flush(self):
        pass


def f():
    """:func:`lazy`, imported where it is used."""
    from curricula.other import lazy as lazy
    from curricula.budget import budget
    return budget, lazy
'''
CODE_PROBLEMS = [
    "curricula/mod.py:4: curricula.mod.gone: gone is not defined in the module",
    "curricula/mod.py:5: C.gone: C.gone is not defined in class C",
    "curricula/mod.py:6: budget_of_old: budget_of_old is not defined in the module, its imports or its classes",
    "curricula/mod.py:7: curricula.mod.g: g is imported into curricula/mod.py, not defined there: name "
    "curricula.other.g",
]


def test_code_reference_check_finds_a_planted_bad_reference(tmp_path):
    """Sphinx references in a module's docstrings resolve by file (``curricula.``), relative to the module (its
    names, imports, classes, the names its functions import) or outside the repository (``ast``, ``int``); the
    planted stale ones are found with file, line and why (so the test of the whole code can fail)."""
    (tmp_path / "curricula").mkdir()
    (tmp_path / "curricula" / "mod.py").write_text(CODE)
    (tmp_path / "curricula" / "other.py").write_text("def g():\n    pass\n\n\ndef lazy():\n    pass\n")
    (tmp_path / "curricula" / "budget.py").write_text("def budget():\n    pass\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text('""":func:`curricula.nowhere`: tests are not checked."""\n')
    files = ["curricula/mod.py", "curricula/other.py", "curricula/budget.py", "tests/test_x.py"]
    assert [str(p) for p in doc_links.check_sources(tmp_path, files)] == CODE_PROBLEMS


def test_generated_page_prose_names_resolve(tmp_path):
    """On docs/config-reference.md (generated from the schema's descriptions) a dotted name in plain prose is
    checked too, and the problem points at the schema; on another page prose is not checked."""
    (tmp_path / "curricula").mkdir()
    (tmp_path / "curricula" / "mod.py").write_text("X = 1\n")
    (tmp_path / "docs").mkdir()
    prose = "# P\n\napplied over curricula.mod.X, then curricula.mod.GONE (the default).\n"
    (tmp_path / "docs" / "config-reference.md").write_text(prose)
    (tmp_path / "docs" / "other.md").write_text(prose)
    files = ["curricula/mod.py", "docs/config-reference.md", "docs/other.md"]
    assert [str(p) for p in doc_links.check_docs(tmp_path, files)] == [
        "docs/config-reference.md:3: curricula.mod.GONE: GONE is not defined in the module (generated from "
        "schemas/config.schema.yaml: fix it there)"]
