"""The documentation: docs/config-reference.md is the page the config schema generates
(curricula/config_reference.py)."""

from pathlib import Path

from curricula import config_reference

REPO = Path(__file__).resolve().parents[1]


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
    assert "python -m curricula.config_reference" in capsys.readouterr().err

