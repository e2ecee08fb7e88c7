"""Check that the documentation's references resolve: ``python -m tools.doc_links`` (``tests/test_docs.py``).

The pages are README.md, configs/README.md and docs/*.md. In each, outside fenced code blocks:

- every relative Markdown link ``[text](path)`` or ``[text](path#anchor)`` names an existing file, and its anchor a
  heading of that file by GitHub's slug rules (``#anchor`` alone: a heading of the page itself);
- every token of an inline code span that names a file of this repository exists: ``bench/floor.py``,
  ``configs/wikiqa.yaml`` (a path whose first part is a top-level entry of the repository), or ``test_faults.py``
  (a bare file name with a source suffix, which must be the name of a repository file);
- every ``path.py:name`` or ``path.py::name`` reference (``curricula/plumbing/config.py:side_folder``,
  ``curricula/curriculum/weighting.py:PairEase.ease``, ``tests/test_workflow.py::test_x``) names a function, class or
  variable the file defines or imports (parsed with :mod:`ast`, :mod:`tools.code_refs`; dotted names look inside
  classes; a test id's ``[params]`` is dropped), and so does every dotted ``curricula.module.name`` or
  ``tools.module.name``;
- on a generated page (:data:`GENERATED`: docs/config-reference.md, made from the schema's descriptions), also every
  dotted ``curricula.``/``tools.`` name of its prose, where the schema's text names the code without code marks.

In the code (:func:`check_sources`): every Sphinx reference (``:func:``, ``:class:``, ``:mod:``, ``:data:``,
``:meth:``, ``:attr:``) in the docstrings and comments of the ``.py`` files under curricula/, tools/,
workflow_scripts/, analyses/ and bench/ resolves, a full dotted name by file and a short one relative to its module
(:mod:`tools.code_refs` says how).

Skipped by rule, as outputs or examples rather than repository files: paths under ``results/``, ``results_*``,
``logs/``, ``benchmarks/``, ``.snakemake/``, ``.venv/``, absolute paths (``/tmp``, ``/work``, ``/path/to``), paths
outside the repository (``../shared``), paths with a placeholder or pattern (``<dataset>``, ``{md,csv}``, ``*``),
links with a scheme (``https:``), a token with a colon that is not a ``.py`` reference (``git show rev:path``), and a
path whose first part is no top-level entry of the repository (a path inside a results folder such as
``dense/neighbors.parquet``, or another repository's ``SMN_MSN/dataclass.py``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tools.code_refs import Resolver, role_problems, source_files, top_level

REPO = Path(__file__).resolve().parents[1]

#: prefixes of paths that are run outputs, local installs or places outside the repository, never repository files
OUTPUT_PREFIXES = ("results/", "results_", "logs/", "benchmarks/", ".snakemake/", ".venv/", "../", "/")
#: characters that make a path a placeholder or a pattern (``<dataset>``, ``table.{md,csv}``, ``*.png``)
PLACEHOLDER_CHARS = frozenset("<>{}*")
#: suffixes of a bare file name that must name a repository file (data and model files are outputs)
SOURCE_SUFFIXES = (".py", ".smk", ".yaml", ".yml", ".md", ".rst", ".toml", ".lock", ".cfg", ".sh")
#: directories never listed as repository files when the repository is not a git checkout
UNTRACKED_DIRS = frozenset({".git", ".venv", ".snakemake", ".pytest_cache", "__pycache__", "logs", "benchmarks"})

#: the generated pages (relative paths) and what each is generated from, where a stale name is to be fixed
GENERATED = {"docs/config-reference.md": "schemas/config.schema.yaml"}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
PY_REF = re.compile(r"^(?P<file>[\w./-]+\.py)(?P<sep>::?)(?P<name>[\w.:\[\]-]+)$")
DOTTED = re.compile(r"^(?:curricula|tools)(?:\.\w+)+$")
#: a dotted name in a generated page's prose (outside code spans): ``curricula.active.loop.METHODS``
PROSE_DOTTED = re.compile(r"(?<![\w./-])(?:curricula|tools)(?:\.\w+)+")
PATHLIKE = re.compile(r"^[\w.\-/<>{}*@+~=]+$")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


@dataclass(frozen=True)
class Problem:
    """One reference that does not resolve: the page or source file (relative to the repository), its line, the
    reference, why."""

    doc: str
    line: int
    ref: str
    message: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.ref}: {self.message}"


def doc_pages(repo: Path) -> list[Path]:
    """The pages checked: README.md, configs/README.md, docs/*.md and the records under docs/ (docs/**/*.md), those
    that exist, in that order."""
    pages = [repo / "README.md", repo / "configs" / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    return [p for p in pages if p.is_file()]


def repository_files(repo: Path) -> frozenset[str]:
    """Paths (relative, POSIX) of the repository's files: git's tracked and untracked-but-not-ignored files in a
    checkout, those deleted from the work tree left out; elsewhere every file below ``repo`` outside
    :data:`UNTRACKED_DIRS` and results folders."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        return frozenset(line for line in out.splitlines() if line and (repo / line).is_file())
    except (OSError, subprocess.CalledProcessError):
        files = (p.relative_to(repo) for p in repo.rglob("*") if p.is_file())
        return frozenset(p.as_posix() for p in files
                         if not (set(p.parts) & UNTRACKED_DIRS or p.parts[0].startswith("results")))


def blank_fences(text: str) -> str:
    """``text`` with every line of a fenced code block (fences included) emptied, so line numbers stay."""
    out, inside = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            inside = not inside
            out.append("")
        else:
            out.append("" if inside else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: links and code marks reduced to their text, lower case, punctuation
    removed (letters, digits, ``_``, ``-`` and spaces stay), spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower().replace("`", ""))
    return text.replace(" ", "-")


def heading_anchors(text: str) -> frozenset[str]:
    """The anchors of a page's headings (outside fenced code), a repeated slug numbered ``-1``, ``-2``... as GitHub
    does."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in blank_fences(text).split("\n"):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m[2])
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")
    return frozenset(anchors)


def line_of(text: str, offset: int) -> int:
    """1-based line number of a character offset."""
    return text.count("\n", 0, offset) + 1


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every Markdown link and image outside fenced code."""
    body = blank_fences(text)
    for m in LINK.finditer(body):
        yield line_of(body, m.start()), m[1]


def code_tokens(text: str) -> Iterator[tuple[int, str]]:
    """(line, token) of every whitespace-separated token of every inline code span outside fenced code, stripped of
    quotes, brackets and trailing punctuation around it; ``ARGS="--configfile x.yaml"`` gives ``x.yaml``, and
    ``ledger/study/only=wikiqa/`` stays one path."""
    body = blank_fences(text)
    for m in CODE_SPAN.finditer(body):
        if "\n\n" in m[2]:
            continue
        for word in re.split(r"[\s,;]+", m[2]):
            # key=value splits (ARGS="...", --config=x), a path with = in a folder name does not (only=wikiqa/)
            for token in [word] if "/" in word.partition("=")[0] else word.split("="):
                token = token.strip("\"'()").rstrip(".:")
                if token:
                    yield line_of(body, m.start()), token


def check_py_ref(repo: Path, files: frozenset[str], file: str, sep: str, name: str) -> str | None:
    """Why ``file:name`` / ``file::name`` does not resolve (None when it does, or when ``file`` is another
    repository's path). A bare file name must be the name of exactly one repository file."""
    if "/" in file:
        if file.split("/")[0] not in top_level(files):
            return None
        if file not in files:
            return f"no file {file} in the repository"
        target = file
    else:
        matches = sorted(f for f in files if f.rsplit("/", 1)[-1] == file)
        if len(matches) != 1:
            return f"{file} names {len(matches)} repository files {matches}; give its path"
        target = matches[0]
    parts = [re.sub(r"\[.*\]$", "", p) for p in (name.split("::") if sep == "::" else name.split("."))]
    return Resolver(repo, files).in_module(repo / target, parts)


def check_path(files: frozenset[str], token: str) -> str | None:
    """Why a path-like code token that names a repository file does not exist (None when it exists or is skipped by
    the module's rules)."""
    if PLACEHOLDER_CHARS & set(token) or token.startswith(OUTPUT_PREFIXES):
        return None
    path = token.rstrip("/")
    if "/" in path:
        if path.split("/")[0] not in top_level(files):
            return None
        if path in files or any(f.startswith(path + "/") for f in files):
            return None
        return f"no file or folder {path} in the repository"
    if not path.endswith(SOURCE_SUFFIXES) or path in top_level(files):
        return None
    if any(f.rsplit("/", 1)[-1] == path for f in files):
        return None
    return f"no repository file is named {path}"


def check_token(repo: Path, files: frozenset[str], token: str) -> str | None:
    """Why one code token does not resolve, by its kind: a ``.py`` reference, a dotted ``curricula.`` name, or a
    path; None for anything else."""
    m = PY_REF.match(token)
    if m:
        return check_py_ref(repo, files, m["file"], m["sep"], m["name"])
    if DOTTED.match(token):
        return Resolver(repo, files).dotted(token)
    if ":" in token or not PATHLIKE.match(token) or not ("/" in token or token.endswith(SOURCE_SUFFIXES)):
        return None
    return check_path(files, token)


def check_link(repo: Path, page: Path, target: str) -> str | None:
    """Why a link from ``page`` does not resolve: a missing file, or an anchor that is no heading of its page."""
    if SCHEME.match(target):
        return None
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"no file {path} (from {page.relative_to(repo).as_posix()})"
    if anchor:
        if dest.suffix != ".md":
            return f"an anchor into {path}, which is no Markdown page"
        if anchor not in heading_anchors(dest.read_text(encoding="utf-8")):
            return f"no heading with anchor #{anchor} in {dest.relative_to(repo).as_posix()}"
    return None


def prose_names(text: str) -> Iterator[tuple[int, str]]:
    """(line, name) of every dotted ``curricula.``/``tools.`` name outside fenced code and code spans."""
    body = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), blank_fences(text))
    for m in PROSE_DOTTED.finditer(body):
        yield line_of(body, m.start()), m[0]


def check_page(repo: Path, files: frozenset[str], page: Path) -> list[Problem]:
    """Every broken link and code reference of one page (on a generated page also of its prose's dotted names)."""
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(repo).as_posix()
    problems = [Problem(name, line, target, why) for line, target in links(text)
                if (why := check_link(repo, page, target))]
    problems += [Problem(name, line, token, why) for line, token in code_tokens(text)
                 if (why := check_token(repo, files, token))]
    if name in GENERATED:
        resolver = Resolver(repo, files)
        problems += [Problem(name, line, dotted, f"{why} (generated from {GENERATED[name]}: fix it there)")
                     for line, dotted in prose_names(text) if (why := resolver.dotted(dotted))]
    return sorted(problems, key=lambda p: p.line)


def check_docs(repo: Path = REPO, files: Iterable[str] | None = None) -> list[Problem]:
    """Every broken reference of every page of :func:`doc_pages`; ``files`` (relative paths) defaults to
    :func:`repository_files`."""
    known = frozenset(files) if files is not None else repository_files(repo)
    return [p for page in doc_pages(repo) for p in check_page(repo, known, page)]


def check_sources(repo: Path = REPO, files: Iterable[str] | None = None) -> list[Problem]:
    """Every Sphinx reference that does not resolve in the code's docstrings and comments (the ``.py`` files under
    curricula/, tools/, workflow_scripts/, analyses/ and bench/), as ``file:line: target: why``; ``files`` as in
    :func:`check_docs`."""
    known = frozenset(files) if files is not None else repository_files(repo)
    return [Problem(file, line, target, why) for file in source_files(known)
            for line, target, why in role_problems(repo, known, file)]


def main(argv: list[str] | None = None) -> int:
    """Print each broken reference of the pages and of the code as ``file:line: reference: why``; exit status 1 when
    there is one."""
    parser = argparse.ArgumentParser(prog="python -m tools.doc_links", description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    files = repository_files(repo)
    problems = check_docs(repo, files) + check_sources(repo, files)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
