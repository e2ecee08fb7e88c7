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
    data = load_configured(cfg["dataset"], cfg["pipeline_seed"])
    counts = data.split_counts()
    # 857 train and 122 dev questions have a positive and a negative (dev: the README's filtered-ref count);
    # test is carved out of train by query after the filter (0.1 of train's 857 kept questions)
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
    data = load_configured(cfg["dataset"], cfg["pipeline_seed"])
    counts = data.split_counts()
    assert all(counts[s] > 0 for s in ("train", "dev", "test")), counts
    for split, n in expect.items():
        assert counts[split] == n
    again = load_configured(cfg["dataset"], cfg["pipeline_seed"])
    assert again.queries.equals(data.queries)


def test_options_of_another_format_are_rejected(tmp_path):
    from curricula.plumbing.config_errors import ConfigError

    with pytest.raises(ConfigError, match="^dataset.options.task: unknown key"):
        configured(tmp_path, {"name": "x", "format": "wikiqa", "files": {"train": "a.tsv"}, "options": {"task": "A"}})
    with pytest.raises(ConfigError, match="^dataset.options.dataset_id: missing"):
        configured(tmp_path, {"name": "x", "format": "ir_datasets", "options": {"splits": {"train": "antique/train"}}})


def _trec_files(tmp_path: Path, n: int, unjudged: int) -> dict:
    """A TREC dataset in one queries file: ``n`` judged queries (a positive and a negative each) and ``unjudged``
    queries without qrels."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    qids = [f"q{i:02d}" for i in range(n + unjudged)]
    (tmp_path / "collection.tsv").write_text("".join(f"d{i}\tdocument number {i}\n" for i in range(2 * n)))
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\tquestion {q}\n" for q in qids))
    (tmp_path / "qrels.txt").write_text("".join(f"q{i:02d} 0 d{2 * i} 1\nq{i:02d} 0 d{2 * i + 1} 0\n"
                                                for i in range(n)))
    return {name: str(tmp_path / f) for name, f in
            (("collection", "collection.tsv"), ("queries", "queries.tsv"), ("qrels", "qrels.txt"))}


@pytest.mark.parametrize("carve_from, moved", [("kept", False), ("all", True)])
def test_a_query_keep_queries_drops_never_moves_the_others_between_splits(tmp_path, caplog, carve_from, moved):
    def splits(folder, unjudged):
        cfg = configured(tmp_path, {"name": "mine", "format": "trec", "files": _trec_files(folder, 40, unjudged),
                                    "split": {"carve_from": carve_from}})
        with caplog.at_level("INFO"):
            data = load_configured(cfg["dataset"], cfg["pipeline_seed"])
        return dict(zip(*data.queries.select("qid", "split").to_dict(as_series=False).values()))

    alone, beside = splits(tmp_path / "a", 0), splits(tmp_path / "b", 3)  # 3 queries without a judged answer
    assert set(alone) == set(beside) and len(alone) == 40
    assert (alone != beside) == moved
    assert "queries per split, as ingested: {'train': 32, 'dev': 4, 'test': 4}" in caplog.text
