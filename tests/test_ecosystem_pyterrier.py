"""A pipeline's rankers and datasets in PyTerrier: every model folder (each architecture, the teacher included) as a
``pt.Transformer`` whose ``pt.Experiment`` AP equals the evaluate stage's on the same candidates and whose scores
are ``score_pairs``'; the dataset's topics, qrels, candidates and runs as PyTerrier frames and files; the pipeline
itself never imports PyTerrier. On a tiny results tree built in-process (tests/ecosystem_tree.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from curricula.data.ingest import INGEST_TABLES, candidate_pairs
from curricula.ecosystem.frames import export_frames, read_frames
from curricula.evaluation.rerank import METRICS
from curricula.plumbing.contracts import CANDIDATE_SCORES, TEACHER_SCORES, read_table, write_table
from curricula.plumbing.layout import Layout
from tests.ecosystem_tree import build_tree, tiny_vectors, write_run
from tests.test_layers import PACKAGE, imported_modules, module_files, outside_imports
from tests.workflow_run import REPO

pt = pytest.importorskip("pyterrier", reason="PyTerrier is the optional extra `pyterrier` (requirements.lock pins it "
                                             "for the tests)")

#: the rankers each saved and re-ranked: every built-in architecture (the cross-encoder as a 1-layer cut; the
#: others small, on small word vectors)
SMALL = {"channels": 16, "hidden": 16}
RANKERS = {"convknrm": {"ranker": "convknrm", "architecture": SMALL}, "cnn_qa": {"ranker": "cnn_qa",
           "architecture": SMALL}, "lstm_qa": {"ranker": "lstm_qa", "architecture": SMALL}, "cross_encoder": {}}
#: the rankers also evaluated with score additivity (the dev candidates then share the test ones' batches)
ADDITIVE = ("convknrm", "teacher")
MEASURES = ["AP"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return build_tree(tmp_path_factory.mktemp("eco_pt"))


def test_frames_hold_the_evaluate_stages_test_candidates_with_bm25(tree):
    layout, data = tree
    frames = read_frames(layout.root)
    test = data["queries"].filter(pl.col("split") == "test")
    assert frames.topics["qid"].tolist() == sorted(test["qid"].to_list())
    # a dialogue: the query is its turns joined by newlines, as the pipeline scores it
    assert all(q == "\n".join(t) for q, t in zip(frames.topics["query"], frames.topics["turns"]))
    pairs = candidate_pairs(data, splits=("test",))
    got = frames.candidates.sort_values(["qid", "docno"])
    assert list(zip(got["qid"], got["docno"])) == list(zip(pairs["qid"], pairs["docid"]))
    assert got["text"].tolist() == pairs["response"].to_list()
    bm25 = read_table(layout.bm25()["candidate_scores"], CANDIDATE_SCORES)
    merged = got.merge(bm25.to_pandas(), left_on=["qid", "docno"], right_on=["qid", "docid"])
    assert len(merged) == len(got) and (merged["score_x"] == merged["score_y"]).all()
    # rank is 0-based in trec_eval's order: score descending, ties by docno descending
    for _, group in frames.candidates.groupby("qid"):
        order = group.sort_values(["score", "docno"], ascending=[False, False])
        assert order["rank"].tolist() == list(range(len(group)))
    qrels = data["qrels"].filter(pl.col("qid").is_in(test["qid"].implode()))
    assert len(frames.qrels) == qrels.height and set(frames.qrels.columns) == {"qid", "docno", "label"}


def test_the_export_reads_back_with_pyterrier(tree, tmp_path):
    layout, _ = tree
    files = export_frames(layout.root, tmp_path / "pt", splits=("dev", "test"))
    assert set(files) == {f"{s}.{k}" for s in ("dev", "test") for k in ("topics", "candidates", "qrels", "bm25")}
    frames = read_frames(layout.root, "test")
    qrels = pt.io.read_qrels(str(files["test.qrels"]))
    pd.testing.assert_frame_equal(qrels.sort_values(["qid", "docno"]).reset_index(drop=True),
                                  frames.qrels.astype({"label": qrels["label"].dtype}))
    run = pt.io.read_results(str(files["test.bm25"])).sort_values(["qid", "docno"]).reset_index(drop=True)
    cands = frames.candidates.sort_values(["qid", "docno"]).reset_index(drop=True)
    assert run[["qid", "docno"]].equals(cands[["qid", "docno"]]) and np.array_equal(run["score"], cands["score"])
    topics = pd.read_parquet(files["test.topics"])
    assert topics["query"].tolist() == frames.topics["query"].tolist()
    assert [list(t) for t in topics["turns"]] == [list(t) for t in frames.topics["turns"]]
    assert pd.read_parquet(files["test.candidates"])[["qid", "docno", "rank"]].equals(
        frames.candidates[["qid", "docno", "rank"]])


@pytest.mark.slow  # a fresh interpreter per entry point
def test_the_pipeline_never_imports_pyterrier():
    """No module of the package outside curricula/ecosystem, and no rule's script, imports PyTerrier or the
    ecosystem package (so neither a pipeline run nor a stage needs the extra)."""
    files = [p for p in module_files() if PACKAGE / "ecosystem" not in p.parents]
    files += sorted((REPO / "workflow_scripts").glob("*.py"))
    assert len(files) > 100
    found = [f"{path.relative_to(REPO)}:{line} imports {name}" for path in files
             for line, name in [*outside_imports(path, frozenset({"pyterrier"})), *imported_modules(path)]
             if name.split(".")[0] == "pyterrier" or name.startswith("curricula.ecosystem")]
    assert not found, "\n".join(found)


def evaluate_stage(layout: Layout, name: str, *, model: Path | None = None, scores: str | None = None,
                   knobs: dict | None = None, additive: bool = False) -> Path:
    """The evaluate stage's entry point on the tree's test candidates (with ``additive``, dev ones too, as the
    default config's score additivity has it): a trained model (``model``) or a reference's ``scores``; returns
    the metrics file (an additive evaluation's outputs go to a second results folder, ``additive``)."""
    from curricula.stages.evaluate import evaluate

    inputs = {n: layout.data(n) for n in INGEST_TABLES}
    inputs.update({"model": str(model)} if model else {"scores": scores})
    out = Layout(str(Path(layout.results) / "additive"), layout.dataset) if additive else layout
    if model:
        outputs, wildcards = out.evaluate(name, 1, additive), {"experiment": name, "seed": "1"}
    else:
        outputs, wildcards = out.reference(name, additive), {"reference": name}
    if additive:
        inputs["bm25"] = layout.bm25()["candidate_scores"]
    evaluate(inputs, outputs, wildcards=wildcards, measures=MEASURES, relevant_min=1, seed=0, knobs=knobs,
             additivity={"steps": 4, "measure": "AP"} if additive else None)
    return Path(outputs["metrics"])


@pytest.fixture(scope="module")
def saved(tree):
    """Every ranker's model folder and config.json, the teacher trained for a few steps and its scores, and the
    evaluate stage's metrics of each, alone and for :data:`ADDITIVE` also with score additivity: {name: (metrics,
    [additive metrics])}."""
    from curricula.models import build_ranker
    from curricula.models.teacher import TeacherConfig, fit_teacher, teacher_scores

    layout, data = tree
    vectors = tiny_vectors(Path(layout.results) / "tiny.vec")
    metrics = {}
    for name, values in RANKERS.items():
        if "architecture" in values:
            values = {**values, "architecture": {**values["architecture"], "embeddings": str(vectors)}}
        spec = write_run(layout, name, 1, values)
        folder = Path(layout.train(name, 1)["model"])
        build_ranker(spec.ranker, seed=3).save(folder)
        knobs = {"score_batch_size": 16, "precision": "fp32", "device": "cpu"}
        metrics[name] = tuple(evaluate_stage(layout, name, model=folder, knobs=knobs, additive=additive)
                              for additive in (False, True)[: 1 + (name in ADDITIVE)])
    cfg = TeacherConfig(layers=1, pooling="mean", max_length=32, steps=4, batch_size=4, lr=1e-3, device="cpu",
                        precision="fp32", threads=2, score_batch_size=16)
    fit_teacher(data, layout.teacher()["model"], cfg)
    write_table(teacher_scores(data, layout.teacher()["model"], cfg), layout.teacher()["scores"], TEACHER_SCORES)
    metrics["teacher"] = tuple(evaluate_stage(layout, "teacher", scores=layout.teacher()["scores"], additive=a)
                               for a in (False, True))
    metrics["bm25"] = (evaluate_stage(layout, "bm25", scores=layout.bm25()["candidate_scores"]),)
    return metrics


def trec_run(path: str) -> pl.DataFrame:
    """A TREC run file's rows (qid, q0, docno, rank, score, tag), sorted by qid, docno."""
    columns = ["qid", "q0", "docno", "rank", "score", "tag"]
    return pl.read_csv(path, separator=" ", has_header=False, new_columns=columns,
                       schema_overrides={"qid": pl.String, "docno": pl.String}).sort("qid", "docno")


@pytest.mark.slow
def test_pt_experiment_ap_equals_the_evaluate_stage_and_scores_equal_score_pairs(tree, saved):
    from curricula.ecosystem.pyterrier import candidates_source, from_results
    from curricula.models import score_pairs

    layout, _ = tree
    frames = read_frames(layout.root)
    bm25 = candidates_source(frames.candidates)
    rerankers = {name: from_results(layout.root, name, 1) for name in RANKERS}
    rerankers["teacher"] = from_results(layout.root, "teacher", precision="fp32")  # its folder records none
    assert all(r.precision == "fp32" and r.batch_size == 16 for n, r in rerankers.items() if n != "teacher")
    # each PyTerrier pipeline (BM25's candidates >> a re-ranker) runs once; pt.Experiment evaluates its results
    runs = {"bm25": bm25.transform(frames.topics),
            **{name: (bm25 >> r).transform(frames.topics) for name, r in rerankers.items()}}
    res = pt.Experiment(list(runs.values()), frames.topics, frames.qrels, eval_metrics=[pt.measures.AP],
                        names=list(runs), perquery=True, verbose=False)
    gaps = {}
    for name, files in saved.items():
        ours = res[(res["name"] == name) & (res["measure"] == "AP")].sort_values("qid")
        for kind, path in zip(("alone", "additive"), files):
            stage = read_table(path, METRICS).filter(pl.col("measure") == "AP").sort("qid")
            assert ours["qid"].tolist() == stage["qid"].to_list()
            gaps[name, kind] = float(np.abs(ours["value"].to_numpy() - stage["value"].to_numpy()).max())
    assert len(gaps) == len(saved) + len(ADDITIVE) and max(gaps.values()) <= 1e-6, gaps
    cands = frames.candidates.sort_values(["qid", "docno"])
    for name, reranker in rerankers.items():
        scored = runs[name].sort_values(["qid", "docno"])
        direct = score_pairs(reranker.ranker, cands["query"].tolist(), cands["text"].tolist(), batch_size=16,
                             precision="fp32", progress=False)
        assert np.array_equal(scored["score"].to_numpy(), direct.astype(np.float64)), name
        assert scored["score"].std() > 0, name  # scores that separate the pairs, not a constant
        assert (scored.groupby("qid")["rank"].min() == 0).all()
        if name != "teacher":  # the evaluate stage scored the test candidates alone: the same scores
            stage = trec_run(layout.evaluate(name, 1)["run"])
            # to float32 round-off, not bit for bit: score_pairs batches pairs by length in input order, the stage's
            # order differs, and on some CPUs a matrix product's last bit depends on which rows share its batch
            gap = np.abs(stage["score"].to_numpy() - direct.astype(np.float32).astype(np.float64)).max()
            assert gap <= 1e-5, (name, gap)


@pytest.mark.slow
def test_pyterrier_reads_the_pipelines_own_runs(tree, saved):
    """``pt.io.read_results`` reads the evaluate stage's TREC runs as they are: the same pairs and scores."""
    layout, _ = tree
    for name in RANKERS:
        path = layout.evaluate(name, 1)["run"]
        run = pt.io.read_results(path).sort_values(["qid", "docno"])
        ours = trec_run(path)
        assert run["docno"].tolist() == ours["docno"].to_list()
        assert np.array_equal(run["score"].to_numpy(), ours["score"].to_numpy())
