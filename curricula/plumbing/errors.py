"""Errors that point at the offending input: file, line and what was expected."""

from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, SupportsInt, cast


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


class DeviceError(RuntimeError):
    """A job that cannot use the device it was given or asked for (a GPU allocation torch cannot use, ``device:
    cuda`` without CUDA, bf16 on a card without native bf16). The message says what was found and what to change."""


def whole_number(value: Any, what: str, minimum: int = 1) -> int:
    """``value`` as an int when it is a whole number >= ``minimum`` (``3`` or ``3.0``; never a bool); otherwise a
    ValueError naming ``what``, the config key or argument (``experiments.x.negatives.m``, ``iteration_steps``)."""
    # the same object, for int(): it reaches int() only as a finite numbers.Real, which int() takes (through
    # __int__ or __trunc__), but typeshed's numbers.Real declares neither as returning an int
    number = cast(SupportsInt, value)
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or int(number) != value or value < minimum):
        raise ValueError(f"{what}: need an integer >= {minimum}, got {value!r}")
    return int(number)
