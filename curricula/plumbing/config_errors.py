"""A config checked against ``schemas/config.schema.yaml`` with one line per error, for people.

JSON Schema's own messages quote the whole offending value and, for an unknown key, the whole mapping it sits in
(hundreds of lines for the top level). :func:`config_errors` turns each error into one line that names the key by
its dotted path, says what is wrong in a few words, suggests the key that was probably meant, and names the config
file that set it (:func:`key_source`). :func:`check_config` validates (filling the schema's defaults, as
``snakemake.utils.validate`` does) and raises :class:`ConfigError` with those lines.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

#: a value quoted in a message is cut to this many characters
QUOTE = 60
#: the keys whose value seeds the pipeline's random choices, beside ``seeds`` (the list of the rankers' training
#: seeds): a list given to one of them is almost always meant for ``seeds``
SCALAR_SEEDS = ("pipeline_seed",)
#: keys that were renamed, by key path: what the unknown old key's line says instead of a guess
RENAMED = {("seed",): "renamed pipeline_seed (the seed of the splits, negatives, ties and the teacher's and G's "
                      "fine-tuning); the rankers' training seeds are the list `seeds`"}


class ConfigError(ValueError):
    """A config that does not pass the schema; ``lines`` holds one message per error."""

    def __init__(self, lines: Sequence[str]):
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def _with_defaults(validator_class):
    """A validator class that fills each property's schema default into the instance as it validates (the recipe
    of the jsonschema FAQ, as snakemake.utils.validate uses it)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        for name, subschema in properties.items():
            if "default" in subschema and isinstance(instance, dict):
                instance.setdefault(name, subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


DefaultFillingValidator = _with_defaults(Draft202012Validator)


def dotted(path: Sequence[Any]) -> str:
    """``train.eval_every``, ``experiments.a.pacing``: a key path as a user writes it (``(top level)`` for none)."""
    return ".".join(str(part) for part in path) or "(top level)"


def quote(value: Any) -> str:
    """``value``'s repr, cut to :data:`QUOTE` characters."""
    text = repr(value)
    return text if len(text) <= QUOTE else text[: QUOTE - 3] + "..."


def unknown_keys(error: ValidationError) -> list[str]:
    """The keys of the mapping that an ``additionalProperties: false`` error is about that its schema does not
    allow (neither a property nor matching a pattern property)."""
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    allowed = set(error.schema.get("properties", {}))
    return [key for key in error.instance if key not in allowed and not any(p.search(key) for p in patterns)]


def did_you_mean(key: str, candidates: Sequence[str]) -> str:
    """`` (did you mean eval_every?)`` for the closest candidate to a misspelled ``key``; else the candidates when
    they are few, else nothing."""
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (expected one of: {', '.join(candidates)})" if 0 < len(candidates) <= 12 else ""


def _type_names(expected: Any) -> str:
    names: list[str] = expected if isinstance(expected, list) else [expected]
    words = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
             "object": "a mapping", "array": "a list", "null": "null"}
    return " or ".join(words.get(name, name) for name in names)


def error_lines(error: ValidationError) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(key path, what is wrong) for one schema error; an unknown-keys error gives one per unknown key."""
    path = tuple(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        for key in unknown_keys(error):
            what = RENAMED.get(path + (key,))
            yield path + (key,), what or "unknown key" + did_you_mean(key, list(error.schema.get("properties", {})))
        return
    if kind == "enum" and "propertyNames" in error.schema_path and isinstance(error.instance, str):
        yield path + (error.instance,), "unknown key" + did_you_mean(error.instance, list(error.validator_value))
        return
    if kind == "type":
        hint = ""
        if path and path[-1] in SCALAR_SEEDS and isinstance(error.instance, list):
            hint = f"; `{path[-1]}` is one seed, the rankers' training seeds are the list `seeds`"
        yield path, f"expected {_type_names(error.validator_value)}, got {quote(error.instance)}{hint}"
    elif kind == "enum":
        yield path, f"{quote(error.instance)} is not one of {', '.join(map(str, error.validator_value))}"
    elif kind == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
        for key in missing:
            yield path + (key,), "missing (required)"
    elif kind in ("oneOf", "anyOf") and error.context:
        deepest = max(error.context, key=lambda e: len(e.absolute_path))
        yield from error_lines(deepest)
    else:
        message = error.message
        instance_repr = repr(error.instance)
        if len(instance_repr) > QUOTE and instance_repr in message:
            message = message.replace(instance_repr, quote(error.instance))
        yield path, message


def key_source(path: Sequence[Any], layers: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The label of the last config layer (``(file name, its content)``, in the order they are merged) whose
    content holds the key ``path`` (or, for a key that is missing, its parent); None when no layer does."""
    for label, content in reversed(layers):
        node: Any = content
        for part in path:
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            return label
    return None


def config_errors(config: dict[str, Any], schema: Mapping[str, Any],
                  layers: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> list[str]:
    """One line per way ``config`` breaks ``schema``, ``<key path>: <what is wrong> (set in <file>)``, sorted by
    key path; an empty list for a valid config, whose schema defaults are then filled in place."""
    lines: dict[str, str] = {}
    for error in DefaultFillingValidator(schema).iter_errors(config):
        for path, what in error_lines(error):
            source = key_source(path, layers) or key_source(path[:-1], layers)
            where = f" (set in {source})" if source else ""
            lines.setdefault(dotted(path), f"{dotted(path)}: {what}{where}")
    return [lines[key] for key in sorted(lines)]


def check_config(config: dict[str, Any], schema: Mapping[str, Any],
                 layers: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """Validate ``config`` in place (schema defaults filled in) and return it; a config that breaks the schema
    raises :class:`ConfigError` with :func:`config_errors`'s lines."""
    lines = config_errors(config, schema, layers)
    if lines:
        raise ConfigError(lines)
    return config
