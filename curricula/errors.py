"""Errors that point at the offending input: file, line and what was expected."""

from __future__ import annotations

from pathlib import Path


class InputFormatError(ValueError):
    """A malformed input file.

    The message reads ``path:line: problem`` (``path: problem`` when no line applies), the form
    compilers use, so editors and terminals can jump straight to the offending line.
    """

    def __init__(self, path: str | Path, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class SchemaError(ValueError):
    """A table whose columns or types do not match its documented contract."""
