"""Config loading and validation against ``schemas/config.schema.yaml`` (the same check the Snakefile runs)."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from curricula.plumbing.config_errors import check_config
from curricula.plumbing.layout import Layout

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


def validate_config(config: dict[str, Any], layers: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """Validate ``config`` in place (filling schema defaults); return it.

    An unknown key or a wrong type raises :class:`~curricula.plumbing.config_errors.ConfigError` (a ValueError),
    one line per error naming the key (and, with ``layers``, :func:`config_layers`, the file that set it).
    """
    return check_config(config, read_yaml(SCHEMA), layers)


def _merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay a config on another: Snakemake's recursive merge (overlay wins, dicts merge), with two exceptions.

    An overlay whose ``dataset`` names *another* dataset (a different ``dataset.name``) replaces the whole
    ``dataset`` section instead of merging into it: the default's chitchat ``options`` (or ``files``) mean nothing
    to a WikiQA loader, and a merged section would fail validation with keys the user never wrote.
    An overlay's ``experiments`` replaces the default grid: an experiment grid is one unit, and a user who lists
    their experiments (or ``experiments: {}`` for the baseline alone) does not want the default ones trained too.
    """
    out = _merge(base, overlay)
    if "experiments" in overlay:
        out["experiments"] = copy.deepcopy(overlay["experiments"])
    new = overlay.get("dataset")
    old = base.get("dataset")
    if isinstance(new, Mapping) and isinstance(old, Mapping) and new.get("name", old.get("name")) != old.get("name"):
        out["dataset"] = copy.deepcopy(dict(new))
    return out


#: libyaml's safe loader where PyYAML was built with it (ten times faster on the 57 KB schema every start reads)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(stream: Any) -> Any:
    """``yaml.safe_load`` with :data:`SAFE_LOADER`: the same values, errors with the same line and column."""
    return yaml.load(stream, Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file's content, as written (an empty file is an empty config; nothing merged or validated)."""
    with open(path, encoding="utf-8") as fh:
        return load_yaml(fh) or {}


def apply_overlays(config: dict[str, Any], default: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Recompute the Snakefile's ``config`` in place as ``merge(default, overlays)``; return it.

    ``default`` is config.yaml's content (:func:`read_yaml`, read once by the Snakefile); ``overlay`` is what
    ``--configfile``/``--config`` gave (``workflow.config_settings.overwrite_config``).
    """
    merged = merge(default, overlay or {})
    config.clear()
    config.update(merged)
    return config


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read one or more YAML config files (later ones overlay earlier ones), overlay ``overrides`` (what Snakemake's
    ``--config`` gave, parsed) last, and validate the result."""
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return validate_config(merge(config, overrides or {}))


def side_folder(config: Mapping[str, Any], kind: str, name: str | None = None) -> str:
    """Where the rules of this config write their ``kind`` (``logs`` or ``benchmarks``) files
    (:meth:`curricula.plumbing.layout.Layout.side`); ``name`` replaces the dataset's name (``study`` for the
    findings page)."""
    return Layout.of(config).side(kind, name)


def results_dir(config: Mapping[str, Any]) -> Path:
    """``<results>/<dataset name>``: where every stage of this config writes."""
    return Path(Layout.of(config).root)


def config_layers(default: Mapping[str, Any], configfiles: Sequence[str | Path], config_args: Sequence[str] = (),
                  overwrite: Mapping[str, Any] | None = None) -> list[tuple[str, Mapping[str, Any]]]:
    """The config's layers in the order they are merged, (label, content), as
    :func:`curricula.plumbing.config_errors.key_source` reads them: config.yaml, each ``--configfile`` (labelled by
    its path relative to the working directory when under it), then the top-level keys that ``--config``
    arguments (``key=value``, Snakemake's ``config_args``) set, labelled ``--config``, with their values in
    ``overwrite`` (Snakemake's merged overlay)."""
    layers: list[tuple[str, Mapping[str, Any]]] = [("config.yaml", default)]
    for path in configfiles:
        rel = os.path.relpath(path)
        layers.append((str(path) if rel.startswith("..") else rel, read_yaml(path)))
    keys = [arg.split("=", 1)[0].strip() for arg in config_args if "=" in arg]
    if keys:
        layers.append(("--config", {key: (overwrite or {}).get(key) for key in keys}))
    return layers
