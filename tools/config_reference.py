"""docs/config-reference.md from ``schemas/config.schema.yaml``: every config key with its type, default, allowed values
and description.

    python -m tools.config_reference            # rewrite docs/config-reference.md
    python -m tools.config_reference --check    # exit 1 when the page differs from what the schema gives

The page lists each top-level key under its own heading and every key below it by its dotted path: ``<name>`` stands
for a key the user chooses (an experiment's name, a claim's id, a file role), and a key that exists only for some
value of a sibling (the loader options of one ``dataset.format``) says so. ``tests/test_docs.py`` fails when the page
is stale and when a key of the schema has no description.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curricula.plumbing.config import load_yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"
PAGE = REPO / "docs" / "config-reference.md"
COMMAND = "python -m tools.config_reference"
WIDTH = 120

#: what ``<...>`` stands for in the path of a mapping's entries, by the mapping's key (default ``name``)
ENTRY_NAMES = {"files": "role", "datasets": "key", "claims": "id", "experiments": "name", "ref": "split",
               "splits": "split"}
#: constraint keywords of the schema and how each reads after the type
CONSTRAINTS = (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"), ("exclusiveMaximum", "< {}"),
               ("minItems", "at least {} items"), ("maxItems", "at most {} items"),
               ("minLength", "at least {} characters"), ("minProperties", "at least {} entries"),
               ("maxProperties", "at most {} entries"), ("pattern", "matching `{}`"))


@dataclass(frozen=True)
class Entry:
    """One key of the config: its dotted path, what it takes, its default (None: none), its description and the
    condition under which it exists (empty: always)."""

    key: str
    kind: str
    default: str | None
    description: str
    condition: str = ""


def load_schema(path: Path = SCHEMA) -> dict[str, Any]:
    """The schema as the validator reads it (YAML, anchors resolved)."""
    with open(path, encoding="utf-8") as fh:
        return load_yaml(fh)


def value_text(value: Any) -> str:
    """A schema value as it is written in a YAML config: ``null``, ``true``, ``[1, 2]``, ``{}``, ``5e-05``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    return str(value) if str(value) else '""'


def kind_text(node: Mapping[str, Any]) -> str:
    """What a schema node accepts, in words: its types (``list of integer``, ``mapping``), allowed values, the
    alternatives of a ``oneOf``/``anyOf``, then its constraints (``integer, ≥ 1``)."""
    if "const" in node:
        base = f"`{value_text(node['const'])}`"
    elif "enum" in node:
        base = "one of " + ", ".join(f"`{value_text(v)}`" for v in node["enum"])
    elif "oneOf" in node or "anyOf" in node:
        base = " or ".join(kind_text(alt) for alt in node.get("oneOf", node.get("anyOf", [])))
    else:
        types = node.get("type", [])
        names = []
        for name in [types] if isinstance(types, str) else types:
            if name == "array" and isinstance(node.get("items"), Mapping):
                inner = kind_text(node["items"])
                names.append(f"list of ({inner})" if " " in inner else f"list of {inner}")
            else:
                names.append({"array": "list", "object": "mapping"}.get(name, name))
        base = " or ".join(names) or "any"
    limits = ["non-empty" if (word, node[word]) in (("minItems", 1), ("minProperties", 1)) else text.format(node[word])
              for word, text in CONSTRAINTS if word in node]
    if node.get("uniqueItems"):
        limits.append("no repeats")
    return ", ".join([base, *limits])


def description_text(node: Mapping[str, Any]) -> str:
    """A node's description on one line; for a ``oneOf`` without one, its alternatives' descriptions in turn."""
    text = node.get("description") or "; ".join(
        f"{kind_text(alt)}: {alt['description'].strip()}" for alt in node.get("oneOf", []) if alt.get("description"))
    return " ".join(str(text).split())


def condition_text(test: Mapping[str, Any], parent: str) -> str:
    """An ``if`` of the schema as the condition it states: ``dataset.format`` is ``chitchat``."""
    parts = [f"`{parent}.{name}` is `{value_text(rule['const'])}`"
             for name, rule in test.get("properties", {}).items() if "const" in rule]
    return " and ".join(parts)


def entries(node: Mapping[str, Any], key: str, condition: str = "", required: bool = False,
            listed: bool = True) -> Iterator[Entry]:
    """Every key at or below ``key`` in document order. ``listed=False`` skips the row of ``key`` itself (a
    conditional branch restating a key listed already) but still lists the keys below it."""
    if listed:
        kind = kind_text(node) + (", required" if required else "")
        default = value_text(node["default"]) if "default" in node else None
        yield Entry(key, kind, default, description_text(node), condition)
    needed = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        yield from entries(child, f"{key}.{name}" if key else name, condition, name in needed)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        entry_name = ENTRY_NAMES.get(key.rsplit(".", 1)[-1], "name")
        yield from entries(extra, f"{key}.<{entry_name}>", condition)
    for alternative in node.get("oneOf", []):
        for name, child in alternative.get("properties", {}).items():
            yield from entries(child, f"{key}.{name}", condition)
    for branch in node.get("allOf", []):
        if "if" in branch and "then" in branch:
            when = " and ".join(filter(None, [condition, condition_text(branch["if"], key)]))
            for name, child in branch["then"].get("properties", {}).items():
                yield from entries(child, f"{key}.{name}", when, listed=False)


def undocumented(schema: Mapping[str, Any]) -> list[str]:
    """The keys of the schema without a description."""
    return [e.key for name, node in schema["properties"].items() for e in entries(node, name) if not e.description]


def escape(text: str) -> str:
    """Markdown's special characters escaped outside code spans: ``<`` and ``>`` (so ``results/<key>/`` is not read
    as an HTML tag), ``*`` and an underscore at a word's edge (``__eou__`` is no emphasis; ``neighbors_k`` stays)."""
    pieces = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else re.sub(r"[<>*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\\g<0>", p)
                   for p in pieces)


#: a word that would start a list item, a heading or a quote at the start of a line
LINE_START_MARKER = re.compile(r"^([-+*>]|\d+[.)]|#+)$")


def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """``text`` wrapped greedily at :data:`WIDTH` columns after the indents ``first`` (first line) and ``rest``;
    a word that would start a line as a Markdown marker (``-``, ``1.``, ``#``) takes the word before it along."""
    lines: list[list[str]] = [[]]
    for word in text.split():
        line = lines[-1]
        indent = first if len(lines) == 1 else rest
        if line and len(indent) + len(" ".join([*line, word])) > WIDTH:
            carried = [line.pop()] if LINE_START_MARKER.match(word) and len(line) > 1 else []
            lines.append([*carried, word])
        else:
            line.append(word)
    return [(first if i == 0 else rest) + " ".join(words) for i, words in enumerate(lines) if words]


def entry_lines(entry: Entry) -> list[str]:
    """One entry as a wrapped list item: the key, the condition, its kind and default, then its description."""
    head = f"**`{entry.key}`**" + (f" (when {entry.condition})" if entry.condition else "")
    facts = entry.kind + (f"; default `{entry.default}`" if entry.default is not None else "; no default")
    text = f"{head}: {facts}." + (f" {escape(entry.description)}" if entry.description else "")
    return wrap(text, "- ", "  ")


def paragraph(text: str) -> list[str]:
    """Text wrapped at the page width."""
    return wrap(text)


def render(schema: Mapping[str, Any], source: str = "schemas/config.schema.yaml") -> str:
    """The whole page."""
    lines = ["# Configuration reference", "",
             *paragraph("What does each key of a config mean, what does it accept, and what is its default?"), "",
             *paragraph(f"Generated from `{source}` by `{COMMAND}`; edit the schema, not this page "
                        "(`tests/test_docs.py` fails when the two differ). " + escape(description_text(schema)) +
                        " A key with no default stays absent unless a config sets it; its description says how "
                        "absence is read. How configs and overlays combine: [configuration.md](configuration.md)."),
             ""]
    needed = set(schema.get("required", []))
    for name, node in schema["properties"].items():
        lines += [f"## `{name}`", ""]
        for entry in entries(node, name, required=name in needed):
            lines += entry_lines(entry)
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with ``--check`` say whether it is current (exit 1 when stale)."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page is stale")
    parser.add_argument("--schema", type=Path, default=SCHEMA)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    text = render(load_schema(args.schema))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
