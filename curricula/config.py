"""Config loading and validation against ``schemas/config.schema.yaml`` (the same check the Snakefile runs)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` in place (filling schema defaults) with snakemake.utils.validate; return it.

    An unknown key or a wrong type raises snakemake's WorkflowError naming the key.
    """
    from snakemake.utils import validate

    validate(config, str(SCHEMA), set_default=True)
    return config


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge as Snakemake does for ``--configfile`` overlays (overlay wins, dicts merge)."""
    out = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(*paths: str | Path) -> dict[str, Any]:
    """Read one or more YAML config files (later ones overlay earlier ones) and validate the result."""
    config: dict[str, Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            config = merge(config, yaml.safe_load(fh) or {})
    return validate_config(config)


def results_dir(config: Mapping[str, Any]) -> Path:
    """``<results>/<dataset name>``: where every stage of this config writes."""
    return Path(config.get("results", "results")) / config["dataset"]["name"]
