"""Extending the pipeline through the public registries alone (docs/extending.md): a toy difficulty function, pacing
function and ranker registered here are accepted, checked and planned like the built-in ones, through the config's
``plugins`` in a Snakemake dry run too; and the docs' tables of the built-in extensions agree with the registries."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch

from curricula.curriculum.pacing import PACINGS, register_pacing, resolve_pacing, unregister_pacing
from curricula.difficulty import FUNCTIONS, Inputs, difficulty_table, register, unregister
from curricula.difficulty.penha import percentile_difficulty
from curricula.models import (
    ARCHITECTURES,
    DEFAULT_LR,
    DEFAULT_SCHEDULE,
    RANKERS,
    build_ranker,
    load_ranker,
    lookup_ranker,
    ranker_class,
    register_ranker,
    resolve_architecture,
    score_pairs,
    unregister_ranker,
)
from curricula.models.text import TwoSidedRanker
from curricula.plugins import ENV, load_environment_plugins, load_plugins
from curricula.plumbing.config import SCHEMA, read_yaml
from curricula.training.spec import RankerSpec
from tests.workflow_run import PLUGINS, REPO, TINY, snakemake

# ------------------------------------------------------------------------------------------------- the toys


def r_chars(x: Inputs) -> pl.DataFrame:
    """A pair-level toy: the response's length in characters (``r_chars_raw``, larger = harder) and its percentile
    among the scored pairs (``r_chars``, in [0, 1], 1 = hardest)."""
    raw = x.pairs.join(x.docs.select("docid", "text"), on="docid", how="left").select(
        "qid", "docid", pl.col("text").str.len_chars().fill_null(0).cast(pl.Float64).alias("r_chars_raw"))
    return raw.with_columns(percentile_difficulty(raw["r_chars_raw"]).alias("r_chars"))


def toy_power(step: Any, delta: float, T: float, p: float) -> np.ndarray:
    """A toy pacing: ``min(1, delta + (1 - delta) (s / T)^p)``, the share of the easiest-sorted data at 0-based step
    ``s`` (``T`` in steps); in (0, 1], non-decreasing, 1 from ``T`` on."""
    s = np.asarray(step, dtype=np.float64)
    return np.minimum(1.0, delta + (1.0 - delta) * (np.minimum(s, T) / T) ** p)


class BagOfWords(torch.nn.Module):
    """The toy ranker's network: the logit is the dot product of each side's projected mean word-piece embedding."""

    def __init__(self, embeddings: torch.Tensor, hidden: int, dropout: float, freeze_embeddings: bool):
        super().__init__()
        self.embedding = torch.nn.Embedding.from_pretrained(embeddings, freeze=freeze_embeddings)
        self.project = torch.nn.Linear(embeddings.shape[1], hidden)
        self.dropout = torch.nn.Dropout(dropout)

    def side(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mean = (self.embedding(ids) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)
        return self.project(self.dropout(mean))

    def forward(self, q: torch.Tensor, q_mask: torch.Tensor, d: torch.Tensor, d_mask: torch.Tensor) -> torch.Tensor:
        return (self.side(q, q_mask) * self.side(d, d_mask)).sum(-1)


class ToyRanker(TwoSidedRanker):
    """A toy ranker behind the Ranker interface: the two-sided featurisation, save and load of
    :class:`~curricula.models.text.TwoSidedRanker`, and its own module."""

    name = "toy_bow"

    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        return BagOfWords(embeddings, arch["hidden"], arch.get("dropout") or 0.0, arch["freeze_embeddings"])


TOY_KNOBS = {"embeddings": "model", "freeze_embeddings": False, "query_length": 16, "doc_length": 16, "hidden": 8,
             "dropout": None}


def register_toys() -> None:
    """Register the three toys through the public API (what a plugin module does on import)."""
    register("r_chars", "toy: a response's length in characters", level="pair", compute=r_chars,
             orientation="harder", raw_range=(0.0, math.inf))
    register_pacing("toy_power", toy_power, knobs={"delta": 0.33, "T": 0.9, "p": 2.0}, citation="toy")
    register_ranker("toy_bow", "tests.test_extending:ToyRanker", knobs=TOY_KNOBS, lr=1e-3, schedule="constant",
                    citation="toy")


def unregister_toys() -> None:
    unregister("r_chars")
    unregister_pacing("toy_power")
    unregister_ranker("toy_bow")


@pytest.fixture
def toys() -> Iterator[None]:
    """The toys, registered for one test and removed afterwards."""
    register_toys()
    yield
    unregister_toys()
    assert "r_chars" not in FUNCTIONS and "toy_power" not in PACINGS and "toy_bow" not in RANKERS


# ------------------------------------------------------------------------------------------------- in-process
QUERIES = pl.DataFrame({"qid": ["q1", "q2"], "split": ["train"] * 2, "text": ["hi", "how are you"],
                        "turns": [["hi"], ["how are you"]], "domain": [None, None]},
                       schema_overrides={"domain": pl.String})
DOCS = pl.DataFrame({"docid": ["d1", "d2", "d3", "d4"], "text": ["hello", "no", "fine thanks", "what"]})
PAIRS = pl.DataFrame({"qid": ["q1", "q1", "q2", "q2"], "docid": ["d1", "d2", "d3", "d4"], "rel": [1, 0, 1, 0]})


def test_a_toy_difficulty_function_is_scored_like_a_builtin(toys):
    fn = FUNCTIONS["r_chars"]
    assert fn.pair_level and not fn.run_pairs and not fn.macavaney_h and fn.range_text == "[0, inf)"
    table = difficulty_table(PAIRS, QUERIES, DOCS, ["r_chars", "turns"])
    assert table["r_chars_raw"].to_list() == [5.0, 2.0, 11.0, 4.0]
    assert table["r_chars"].to_list() == pytest.approx([2 / 3, 0.0, 1.0, 1 / 3])  # percentile, 1 = longest


def test_a_toy_pacing_resolves_and_paces_like_a_builtin(toys):
    pacing = resolve_pacing({"name": "toy_power", "p": 3}, 100)
    assert pacing.params == (("T", 90), ("delta", 0.33), ("p", 3)) and pacing.mode == "fraction"
    values = pacing.value(np.arange(0, 120))
    assert values[0] == pytest.approx(0.33) and np.all(np.diff(values) >= 0) and np.all(values[90:] == 1.0)
    assert resolve_pacing({"name": "toy_power"}, 100).params[-1] == ("p", 2.0)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['n'\] for pacing 'toy_power'"):
        resolve_pacing({"name": "toy_power", "n": 2}, 100)


def test_a_toy_ranker_builds_scores_saves_and_loads_like_a_builtin(toys, tmp_path):
    assert RANKERS[-1] == "toy_bow"  # RANKERS is read from the registry when asked for
    assert DEFAULT_LR["toy_bow"] == 1e-3 and DEFAULT_SCHEDULE["toy_bow"] == "constant"
    arch = resolve_architecture("toy_bow", {"hidden": 4})
    assert arch == {"embeddings": "model", "freeze_embeddings": False, "query_length": 16, "doc_length": 16,
                    "hidden": 4}  # dropout: optional, out unless set
    assert lookup_ranker("toy_bow").optional_knobs == ("dropout",)
    assert resolve_architecture("toy_bow", {"dropout": 0.1})["dropout"] == 0.1
    with pytest.raises(ValueError, match=r"knob\(s\) \['kernels'\] do not apply to ranker 'toy_bow'"):
        resolve_architecture("toy_bow", {"kernels": 3})
    spec = RankerSpec(ranker="toy_bow", model="minilm", architecture=tuple(arch.items()))
    ranker = build_ranker(spec, seed=3)
    contexts, responses = ["hello there", "what is the weather"], ["hi", "it is sunny"]
    scores = score_pairs(ranker, contexts, responses, batch_size=2, progress=False, precision="fp32")
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    assert np.array_equal(scores, score_pairs(build_ranker(spec, seed=3), contexts, responses, batch_size=2,
                                              progress=False, precision="fp32"))  # same seed, same ranker
    np.testing.assert_allclose(score_pairs(ranker, contexts, responses, batch_size=1, progress=False,
                                           precision="fp32"), scores, atol=1e-6)  # padding changes no score
    ranker.save(tmp_path / "toy")
    again = load_ranker(tmp_path / "toy")
    assert type(again) is type(ranker) is ranker_class("toy_bow") and type(again).__name__ == "ToyRanker"
    np.testing.assert_allclose(score_pairs(again, contexts, responses, batch_size=2, progress=False,
                                           precision="fp32"), scores, atol=1e-6)


def test_a_plugin_module_is_imported_and_named_for_the_jobs(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, "")  # restored (unset, as a test run has it) afterwards
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "toy_plugin_for_env.py").write_text("LOADED = True\n")
    assert load_environment_plugins() == []
    (module,) = load_plugins(["toy_plugin_for_env"])
    assert module.LOADED and os.environ[ENV] == "toy_plugin_for_env"
    assert load_environment_plugins() == [module]  # what a job's process imports
    with pytest.raises(ValueError, match=r"^plugins: cannot import 'no_such_plugin_xyz' .*PYTHONPATH"):
        load_plugins(["no_such_plugin_xyz"])


def test_the_ranker_registry_carries_class_knobs_lr_and_schedule():
    from curricula.models.qa import CNNQARanker

    entry = lookup_ranker("cnn_qa")
    assert (entry.lr, entry.schedule, entry.optional_knobs) == (1e-3, "linear", ("embedding_dropout",))
    assert entry.defaults == ARCHITECTURES["cnn_qa"] and ranker_class("cnn_qa") is CNNQARanker
    assert [k.name for k in entry.knobs if k.optional] == ["embedding_dropout"]  # default None: out unless set
    ARCHITECTURES["convknrm"]["ngrams"].append(9)  # a fresh copy: the registered default stays
    assert ARCHITECTURES["convknrm"]["ngrams"] == [1, 2, 3]
    with pytest.raises(ValueError, match=r"knob\(s\) \['width'\] do not apply to ranker 'cross_encoder' \(its "
                                         r"knobs: none; use model, layers, max_length\)"):
        resolve_architecture("cross_encoder", {"width": 3})
    # a ranker registered later (a lazy path: nothing imported until its class is asked for) is in every table
    toy = register_ranker("toy_qa", "curricula.models.qa:CNNQARanker", knobs={"width": 3, "gate": None}, lr=2e-3,
                          schedule="constant")
    try:
        assert RANKERS[-1] == "toy_qa" and list(ARCHITECTURES)[-1] == "toy_qa"
        assert (DEFAULT_LR["toy_qa"], DEFAULT_SCHEDULE["toy_qa"]) == (2e-3, "constant")
        assert resolve_architecture("toy_qa", {"gate": 0.5}) == {"width": 3, "gate": 0.5} and toy.knobs[1].optional
        with pytest.raises(ValueError, match="ranker 'toy_qa': its class CNNQARanker has name 'cnn_qa'"):
            ranker_class("toy_qa")
        with pytest.raises(ValueError, match="already registered"):
            register_ranker("toy_qa", CNNQARanker, lr=1e-3, schedule="linear")
    finally:
        unregister_ranker("toy_qa")
    assert "toy_qa" not in RANKERS and "toy_qa" not in DEFAULT_LR
    with pytest.raises(ValueError, match=r"unknown ranker 'toy_qa'; known: \['cross_encoder'"):
        ranker_class("toy_qa")
    with pytest.raises(ValueError, match="lr must be a number > 0"):
        register_ranker("toy_qa", CNNQARanker, lr=0, schedule="linear")
    with pytest.raises(ValueError, match="cls must be a class or a 'package.module:Class' path"):
        register_ranker("toy_qa", "curricula.models.qa.CNNQARanker", lr=1e-3, schedule="linear")
    assert "toy_qa" not in RANKERS

# ------------------------------------------------------------------------------------------------- Snakemake
def toy_grid(weighting_loss: str) -> dict:
    """The tiny dataset, every arm on the toy ranker, and one arm ordered by r_chars, paced by toy_power and weighted
    by r_chars under ``weighting_loss``."""
    return {**TINY, "plugins": ["toy_extensions"], "seeds": [1],
            "train": {**TINY["train"], "ranker": "toy_bow", "architecture": {"hidden": 8}},
            "experiments": {"toy": {"scoring": "r_chars", "pacing": {"name": "toy_power", "p": 3},
                                    "weighting": {"scoring": "r_chars"}, "loss": weighting_loss}}}


@pytest.mark.slow
def test_a_dry_run_plans_a_grid_of_plugin_extensions(tmp_path):
    (tmp_path / "toy_extensions.py").write_text("from tests.test_extending import register_toys\n\nregister_toys()\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), str(PLUGINS)])}
    out = snakemake(tmp_path, "-n", config=toy_grid("pointwise_ce"), env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    jobs = re.split(r"\n(?=(?:local)?rule \w+:)", out.stdout)
    assert any(job.startswith("rule difficulty_function:") and "function=r_chars" in job for job in jobs)
    assert any(job.startswith("rule curriculum:") and "scoring=r_chars" in job for job in jobs)
    assert any(job.startswith("rule train:") and "experiment=toy" in job for job in jobs)
    # the plugin is loaded before the start-up checks: r_chars is no h of D_pair for a pairwise loss
    refused = snakemake(tmp_path, "-n", config=toy_grid("pairwise_ce"), env=env)
    assert refused.returncode != 0
    assert "config: experiments.toy.weighting.scoring: r_chars is pair-level" in refused.stderr
    missing = snakemake(tmp_path, "-n", config={**toy_grid("pointwise_ce"), "plugins": ["no_such_plugin_xyz"]},
                        env=env)
    assert missing.returncode != 0 and "config: plugins: cannot import 'no_such_plugin_xyz'" in missing.stderr


# ------------------------------------------------------------------------------------------------- docs and schema
def table_rows(page: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header line starts with ``header`` on docs/``page``."""
    lines = (REPO / "docs" / page).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert rows, f"docs/{page}: no table under {header!r}"
    return rows


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_docs_difficulty_table_agrees_with_the_registry():
    for names, level, raw, run_pairs, _ in table_rows("pipeline.md", "| function | level | raw value"):
        orientation, value_range = raw.split(", ", 1)
        for name in ticked(names):
            fn = FUNCTIONS[name]  # a name the registry lacks is a KeyError here
            assert (fn.level, fn.orientation, fn.range_text, fn.run_pairs) == (
                level, orientation, value_range, run_pairs == "yes"), name


def test_the_docs_pacing_table_agrees_with_the_registry():
    for names, knobs, mode, _ in table_rows("experiments.md", "| pacing | knobs"):
        documented = {k: float(v) for k, v in re.findall(r"`(\w+)` ([0-9.]+)", knobs)}
        for name in ticked(names):
            entry = PACINGS[name]
            assert (documented, mode) == ({k: float(v) for k, v in entry.knobs.items()}, entry.mode), name


def test_the_docs_ranker_table_agrees_with_the_registry():
    for names, _, knobs in table_rows("rankers.md", "| ranker | what it is"):
        entries = [lookup_ranker(name) for name in ticked(names.split(" (")[0])]
        arch = re.search(r"architecture\.\{([^}]*)\}", knobs)
        documented = set(arch.group(1).split(", ")) if arch else set()
        assert documented == {k.name for entry in entries for k in entry.knobs}, names


def test_the_schema_leaves_the_registered_names_to_the_registries():
    """No key that names a registered difficulty function, pacing function or ranker has an enum in the schema (the
    names are checked against the registries at start-up instead, so a registered one is accepted)."""

    def named(node: Any) -> Iterator[dict]:
        if isinstance(node, dict):
            if "a registered" in str(node.get("description", "")):
                yield node
            for value in node.values():
                yield from named(value)
        elif isinstance(node, list):
            for value in node:
                yield from named(value)

    nodes = list(named(read_yaml(SCHEMA)))
    assert len(nodes) >= 6  # ranker, difficulty.functions and its items, scoring, weighting.scoring, pacing, ...
    assert not [node for node in nodes if "enum" in node or "enum" in node.get("properties", {}).get("name", {})]
    text = SCHEMA.read_text(encoding="utf-8") + (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert "twelve" not in text  # no count of the registered functions to go stale
