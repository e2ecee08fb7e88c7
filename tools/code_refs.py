"""Names of the repository's Python code, resolved with :mod:`ast` (nothing is imported): what the reference checker
(:mod:`tools.doc_links`) uses for the pages' ``path.py:name`` and ``curricula.module.name`` references and for the
Sphinx-style references in the code's docstrings and comments.

A dotted name whose first part is one of :data:`PACKAGES` (``curricula.plumbing.config.side_folder``,
``tools.smoke.gpu``, ``analyses.sequential_simulation.simulate_family``) is looked up by file: the longest prefix that
names a module or package of the repository, then the rest as names inside it. A name a module imports is followed
to the module it comes from when that module is the repository's, and taken as it is otherwise (``np.ndarray``,
``torch.nn.Module``). Inside a class the names are its body's and the ``self.<name>`` its methods assign, then its
bases' (those the repository defines).

In the code, every ``:func:``, ``:class:``, ``:mod:``, ``:data:``, ``:meth:`` and ``:attr:`` reference of the ``.py``
files under :data:`SOURCE_FOLDERS` resolves (:func:`role_problems`), e.g. :func:`curricula.plumbing.config.side_folder`
or, with the ``~`` of Sphinx's short form, :func:`~curricula.plumbing.config.side_folder`. A reference without a
package prefix (:func:`module_names`, :meth:`Resolver.dotted`) is resolved relative to the module it appears in: the
module's own names and the names it imports, then its classes' attributes, then a module beside it (an analysis
script's ``from sequential_simulation import``), then a builtin or an installed module (:mod:`ast`).
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: first parts of the dotted names resolved by file: the package, the tooling, the analyses and the benchmarks
PACKAGES = ("curricula", "tools", "analyses", "bench")
#: the folders whose ``.py`` files' references are checked
SOURCE_FOLDERS = ("curricula", "tools", "workflow_scripts", "analyses", "bench")
#: a Sphinx cross-reference of one of the roles checked; its target may wrap onto the next line of a docstring or a
#: ``#:`` comment
ROLE = re.compile(r":(func|class|mod|data|meth|attr):`([^`]+)`")
#: how deep an import is followed (re-exports of re-exports); a longer chain is taken as resolved
MAX_DEPTH = 8


@cache
def module_names(path: Path) -> dict[str, ast.AST]:
    """Names a module binds at its top level (also inside top-level if/try/with blocks): functions, classes,
    assigned variables and imports, each with its defining node (a class's node lets dotted names look inside)."""
    return defined_names(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body)


def defined_names(body: Sequence[ast.stmt]) -> dict[str, ast.AST]:
    """Names bound by a block of statements, as :func:`module_names` describes."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
            names.update(defined_names(inner))
    return names


@cache
def local_imports(path: Path) -> dict[str, ast.Import | ast.ImportFrom]:
    """The names a module imports anywhere, also inside a function (a torch module imported where it is used), each
    with its import."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update({(alias.asname or alias.name).split(".")[0]: node for alias in node.names})
    return found


@cache
def exported(path: Path) -> frozenset[str]:
    """The names of a module's ``__all__`` (a literal list or tuple of strings; empty without one)."""
    node = module_names(path).get("__all__")
    value = getattr(node, "value", None)
    if isinstance(value, (ast.List, ast.Tuple)):
        return frozenset(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return frozenset()


def class_names(node: ast.ClassDef) -> dict[str, ast.AST]:
    """A class's attributes: the names its body binds and the ``self.<name>`` its methods assign."""
    names = {}
    for method in node.body:
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(method):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                    names[sub.attr] = sub
    return {**names, **defined_names(node.body)}


def imported_from(path: Path, repo: Path, node: ast.Import | ast.ImportFrom, name: str) -> list[str]:
    """The dotted parts of what ``name`` is bound to by the import ``node`` of the module at ``path``: ``import a.b``
    binds ``a``, ``import a.b as c`` binds ``a.b``, ``from x import y as z`` binds ``x.y`` (a relative ``from``
    counted from the module's package)."""
    for alias in node.names:
        if (alias.asname or alias.name).split(".")[0] != name:
            continue
        if isinstance(node, ast.Import):
            return alias.name.split(".") if alias.asname else [name]
        base = (node.module or "").split(".") if node.module else []
        if node.level:
            package = list(path.relative_to(repo).with_suffix("").parts)[:-1]
            base = package[:len(package) - node.level + 1] + base
        return [*base, alias.name]
    return [name]


@dataclass(frozen=True)
class Resolver:
    """Resolves names in the repository at ``repo`` whose files (relative, POSIX) are ``files``; each method returns
    why a name does not resolve, or None when it does."""

    repo: Path
    files: frozenset[str]

    def dotted(self, dotted: str, depth: int = 0) -> str | None:
        """Why a full dotted name (``curricula.module.name``) does not resolve: the longest prefix naming a module or
        package of the repository, then the rest as names inside it. As written (``depth`` 0) the name must be one
        the module defines, or one a package's ``__init__.py`` or the module's ``__all__`` exports: a name a module
        merely imports for its own use is named by the module that defines it."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            stem = "/".join(parts[:i])
            for module in (f"{stem}.py", f"{stem}/__init__.py"):
                if module in self.files:
                    if not parts[i:]:
                        return None
                    why = (self.borrowed(self.repo / module, parts[i:]) if depth == 0 else None) or self.in_module(
                        self.repo / module, parts[i:], depth)
                    if why and module.endswith("__init__.py"):
                        return f"no module {stem}/{parts[i]}.py, and {why}"
                    return why
        return f"no module {parts[0]} in the repository"

    def borrowed(self, path: Path, parts: Sequence[str]) -> str | None:
        """Why ``parts`` does not name a definition of the module at ``path``: its first part is a name the module
        imports (not in its ``__all__``, the module no package's ``__init__.py``); None otherwise."""
        node = module_names(path).get(parts[0])
        if (not isinstance(node, (ast.Import, ast.ImportFrom)) or path.name == "__init__.py"
                or parts[0] in exported(path)):
            return None
        source = ".".join(imported_from(path, self.repo, node, parts[0]))
        return f"{parts[0]} is imported into {path.relative_to(self.repo).as_posix()}, not defined there: name {source}"

    def in_module(self, path: Path, parts: Sequence[str], depth: int = 0) -> str | None:
        """Why ``parts`` is not a name of the module at ``path``: ``parts[0]`` among its names and each further part
        inside the class before it (an imported name followed to its module)."""
        return self.inside(path, module_names(path), parts, "the module", depth)

    def inside(self, path: Path, names: dict[str, ast.AST], parts: Sequence[str], where: str,
               depth: int) -> str | None:
        """Why ``parts`` does not resolve among ``names`` (those of ``where``, in the module at ``path``)."""
        node = names.get(parts[0])
        if node is None:
            return f"{parts[0]} is not defined in {where}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self.followed(path, node, parts, depth)
        if len(parts) == 1:
            return None
        if not isinstance(node, ast.ClassDef):
            return f"{parts[0]} is no class, so it has no {parts[1]}"
        why = self.in_class(path, node, parts[1:], depth)
        return f"{parts[0]}.{why}" if why else None

    def in_class(self, path: Path, node: ast.ClassDef, parts: Sequence[str], depth: int) -> str | None:
        """Why ``parts`` is no attribute of the class ``node`` (of the module at ``path``) nor of a base the module
        defines or imports from the repository."""
        why = self.inside(path, class_names(node), parts, f"class {node.name}", depth)
        if why is None or depth >= MAX_DEPTH:
            return why
        for base in node.bases:
            name = ast.unparse(base).split("[")[0].split(".")
            if self.inside(path, module_names(path), [*name, *parts], "the module", depth + 1) is None:
                return None
        return why

    def followed(self, path: Path, node: ast.Import | ast.ImportFrom, parts: Sequence[str], depth: int) -> str | None:
        """Why ``parts`` does not resolve, its first part bound by the import ``node``: looked up in the repository
        module it comes from (or the module beside ``path``), and taken as resolved when it comes from elsewhere."""
        target = [*imported_from(path, self.repo, node, parts[0]), *parts[1:]]
        if depth >= MAX_DEPTH:
            return None
        if target[0] in PACKAGES and target[0] in top_level(self.files):
            return self.dotted(".".join(target), depth + 1)
        beside = path.parent / f"{target[0]}.py"
        if beside.relative_to(self.repo).as_posix() in self.files:
            return self.in_module(beside, target[1:], depth + 1) if target[1:] else None
        return None

    def relative(self, path: Path, target: str) -> str | None:
        """Why a reference without a package prefix does not resolve in the module at ``path``: its names and
        imports, then its classes' attributes, then the names its functions import, then a module beside it, then a
        builtin or an installed module."""
        parts = target.split(".")
        names = module_names(path)
        if parts[0] in names:
            return self.in_module(path, parts)
        for node in names.values():
            if isinstance(node, ast.ClassDef) and self.in_class(path, node, parts, 0) is None:
                return None
        if parts[0] in local_imports(path):
            return self.followed(path, local_imports(path)[parts[0]], parts, 0)
        beside = path.parent / f"{parts[0]}.py"
        if beside.relative_to(self.repo).as_posix() in self.files:
            return self.in_module(beside, parts[1:]) if parts[1:] else None
        if hasattr(builtins, parts[0]) or installed(parts[0]):
            return None
        return f"{parts[0]} is not defined in the module, its imports or its classes"

    def reference(self, path: Path, target: str) -> str | None:
        """Why one Sphinx reference's target (``~`` and a leading ``.`` dropped) does not resolve from the module at
        ``path``: by file with a package prefix (:data:`PACKAGES`), else relative to the module."""
        top = target.split(".")[0]
        if top in PACKAGES and top in top_level(self.files):
            return self.dotted(target)
        return self.relative(path, target)


@cache
def top_level(files: frozenset[str]) -> frozenset[str]:
    """The first parts of the repository's file paths: its top-level files and folders."""
    return frozenset(f.split("/")[0] for f in files)


@cache
def installed(name: str) -> bool:
    """Whether a top-level module ``name`` can be found outside the repository (the standard library or the venv),
    without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def role_references(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every Sphinx reference of :data:`ROLE` in a source file's text: ``~``, ``!`` and a leading
    ``.`` dropped, an explicit title's ``<target>`` taken, a target wrapped onto the next line of a docstring or
    ``#:`` comment joined."""
    for m in ROLE.finditer(text):
        target = re.sub(r"\s*\n\s*(?:#:?\s*)?", "", m[2]).strip()
        if "<" in target and target.endswith(">"):
            target = target[target.rindex("<") + 1:-1]
        target = target.lstrip("~!.").removesuffix("()")
        if re.fullmatch(r"\w+(?:\.\w+)*", target):
            yield text.count("\n", 0, m.start()) + 1, target


def source_files(files: frozenset[str]) -> list[str]:
    """The ``.py`` files (relative paths) under :data:`SOURCE_FOLDERS`, sorted."""
    return sorted(f for f in files if f.endswith(".py") and f.split("/")[0] in SOURCE_FOLDERS)


def role_problems(repo: Path, files: frozenset[str], file: str) -> list[tuple[int, str, str]]:
    """(line, target, why) of every Sphinx reference of the source file ``file`` that does not resolve."""
    resolver = Resolver(repo, files)
    path = repo / file
    return [(line, target, why) for line, target in role_references(path.read_text(encoding="utf-8"))
            if (why := resolver.reference(path, target))]
