"""Every real sample through the ingest stage as a config names it: schema check, loader, splits, query filter."""

from __future__ import annotations

from pathlib import Path

import pytest

from curricula.data.ingest import ingest_paths, load_configured, write_ingest
from curricula.plumbing.config import REPO, load_config
from curricula.plumbing.contracts import QUERIES, read_table
from tests.conftest import shared_file


def configured(tmp_path: Path, dataset: dict) -> dict:
    """The dataset section after schema validation (defaults filled), as the Snakefile sees it."""
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"dataset": dataset}))
    return load_config(REPO / "config.yaml", path)


def test_wikiqa_readme_example(shared_data, tmp_path):
    cfg = configured(tmp_path, {"name": "wikiqa", "format": "wikiqa",
                                "files": {"train": str(shared_file(shared_data, "wikiqa", "WikiQA-train.tsv")),
                                          "dev": str(shared_file(shared_data, "wikiqa", "WikiQA-dev.tsv"))},
                                "keep_queries": "with_positive_and_negative"})
    assert cfg["dataset"]["options"] == {}  # the default's chitchat options do not leak into another dataset
    data = load_configured(cfg["dataset"], cfg["seed"])
    counts = data.split_counts()
    # 857 train and 122 dev questions have a positive and a negative (dev: the README's filtered-ref count);
    # test is carved out of train by query before the filter (0.1 of train's 2,118 questions)
    assert counts["dev"] == 122
    assert counts["train"] + counts["test"] == 857 and 60 < counts["test"] < 110
    write_ingest(data, ingest_paths(tmp_path))
    assert read_table(tmp_path / "queries.parquet", QUERIES).height == sum(counts.values())


@pytest.mark.parametrize(
    "fmt, files, options, expect",
    [
        ("semeval_cqa", {"train": ("semeval2016_task3_cqa", "SemEval2016-Task3-CQA-QL-train-part2.xml"),
                         "dev": ("semeval2016_task3_cqa", "SemEval2016-Task3-CQA-QL-dev.xml")},
         {"task": "C"}, {"dev": 40}),  # README: 40 of 50 dev org questions have a Good comment
        ("msdialog", {"train": ("ecommerce_ecd", "valid"), "test": ("ecommerce_ecd", "test")}, {}, {"test": 100}),
        ("dailydialog_pp", {"test": ("dailydialog_pp", "dev.json")}, {}, {}),
    ],
)
def test_each_format_ingests_with_all_three_splits(shared_data, tmp_path, fmt, files, options, expect):
    paths = {split: str(shared_file(shared_data, *parts)) for split, parts in files.items()}
    dataset = {"name": fmt, "format": fmt, "files": paths, "options": options}
    if fmt == "semeval_cqa":
        dataset["relevant_min"] = 2  # only Good counts, as in the official scorer
    cfg = configured(tmp_path, dataset)
    data = load_configured(cfg["dataset"], cfg["seed"])
    counts = data.split_counts()
    assert all(counts[s] > 0 for s in ("train", "dev", "test")), counts
    for split, n in expect.items():
        assert counts[split] == n
    again = load_configured(cfg["dataset"], cfg["seed"])
    assert again.queries.equals(data.queries)


def test_options_of_another_format_are_rejected(tmp_path):
    from snakemake.exceptions import WorkflowError

    with pytest.raises(WorkflowError, match="'task' was unexpected"):
        configured(tmp_path, {"name": "x", "format": "wikiqa", "files": {"train": "a.tsv"}, "options": {"task": "A"}})
    with pytest.raises(WorkflowError, match="dataset_id"):
        configured(tmp_path, {"name": "x", "format": "ir_datasets", "options": {"splits": {"train": "antique/train"}}})
