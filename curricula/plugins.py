"""Extensions registered outside the package: modules whose import registers difficulty functions, pacing functions
or rankers through the public registries (:func:`curricula.difficulty.register`,
:func:`curricula.curriculum.pacing.register_pacing`, :func:`curricula.models.register_ranker`).

The config's ``plugins`` lists them (importable module names, e.g. ``my_lab.difficulty``, on ``PYTHONPATH``). The
Snakefile imports them with :func:`load_plugins` right after the config is validated, before anything is planned,
so the start-up checks and the plan see their registrations; :func:`load_plugins` also names them in the environment
variable :data:`ENV`, which every job inherits, and each registry module imports the modules named there once it is
defined (:func:`load_environment_plugins`), so that a job's process knows them too. Torch-free.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from types import ModuleType

#: the environment variable naming the plugin modules (comma-separated) for the jobs' processes
ENV = "CURRICULA_PLUGINS"


def load_plugins(modules: Sequence[str], *, export: bool = True) -> list[ModuleType]:
    """Import each plugin module of ``modules`` (config ``plugins``; one already imported is not imported again) and,
    with ``export``, name them in :data:`ENV` for the processes this one starts. A module that cannot be imported
    is a ValueError naming it (its own errors propagate)."""
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            raise ValueError(f"plugins: cannot import {name!r} ({err}); put the folder that holds it on PYTHONPATH "
                             "or install it in the environment") from None
    if export and modules:
        named = [n for n in os.environ.get(ENV, "").split(",") if n]
        os.environ[ENV] = ",".join(dict.fromkeys([*named, *modules]))
    return loaded


def load_environment_plugins() -> list[ModuleType]:
    """Import the plugin modules :data:`ENV` names (none when it is unset): what a job's process registers."""
    return load_plugins([n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()], export=False)
