"""Every benchmark of bench/ (bench/README.md) runs at a tiny size and prints its table: exit code 0 and the lines
that carry its figures and ratios. The figures themselves are timings and are never checked; what is checked is what
would change if a benchmark broke (a missing row, a ratio line, the pipeline and the raw library disagreeing).
Benchmarks that load a model or start the JVM are slow tests; ``tiny_tree`` (conftest) is the finished tiny run
that those reading a run's folder measure."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.conftest import run_script, script_module

RATIO = r"(\d+\.\d+)x"


def table_rows(out: str) -> list[list[str]]:
    """The cells of every Markdown table row of ``out`` except the separator rows."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
            if line.startswith("|") and not set(line) <= set("|-: ")]


@pytest.mark.slow  # runs the bench script
def test_kde_prints_both_times_their_ratio_and_an_agreement_to_round_off():
    out = run_script("bench/bench_kde", "--queries", 20, "--per-query", 10, "--repeats", 1)
    assert "input: 20 queries x 10 scores, 200 evaluation points" in out
    assert re.search(r"speed ratio scipy / kde_cdf: " + RATIO, out)
    diff = float(re.search(r"max abs difference over the 200 points scipy evaluated: (\S+)", out).group(1))
    assert diff < 1e-6 and "macavaney_heuristics (frame, 200 pairs)" in out


def test_sampler_prints_one_row_per_size_and_the_growth_of_the_per_batch_cost():
    out = run_script("bench/bench_sampler", "--sizes", 200, 400, "--shard-size", 100, "--steps", 10,
                     "--batch-size", 4)
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]
    assert [(r[0], r[1]) for r in rows] == [("200", "2"), ("400", "4")] and all(len(r) == 10 for r in rows)
    for variant in ("root_2", "hcl", "plain"):
        assert re.search(rf"per-batch cost at N=400 / at N=200, {variant}: " + RATIO, out)


@pytest.mark.slow  # runs the bench script
def test_neighbors_gives_faiss_own_top_k_and_the_pipeline_the_same_rows():
    out = run_script("bench/bench_neighbors", "--queries", 30, "--docs", 100, "--dim", 8, "--k", 5,
                     "--chunk-size", 16)
    assert "bare faiss IndexFlatIP add+search (numpy out)" in out and "pipeline neighbors (polars NEIGHBORS out)" in out
    assert re.search(r"ratio pipeline / bare faiss: " + RATIO, out) and "rows 150 vs 150" in out
    assert re.search(r"same top-\d+ for q0: True", out)


def test_timeline_prints_jobs_and_the_share_of_core_seconds_from_a_log(tmp_path):
    from tests.test_bench_timeline import LOG

    (tmp_path / "run.log").write_text(LOG)
    out = run_script("bench/timeline", tmp_path / "run.log", "--cores", 2, "--jobs").splitlines()
    assert [line.split() for line in out[:4]] == [
        ["0", "1", "1", "t1", "ingest"], ["1", "11", "10", "t2", "teacher_train"],
        ["11", "21", "10", "t1", "train", "experiment=baseline,", "seed=1"],
        ["11", "16", "5", "t1", "train", "experiment=baseline,", "seed=2"]]
    assert out[4:] == ["4 jobs, wall 21 s on 2 cores: 36 core-seconds used (86%), a core idle during 6 s",
                       "  1-thread jobs: 16 job-seconds", "  2-thread jobs: 10 job-seconds"]


def test_benchmark_files_last_rows_keep_the_latest_run_and_read_na_as_null(tmp_path):
    tsv = script_module("bench/benchmark_tsv")
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.tsv").write_text(header + "5.0\t0:00:05\t100.5\t1\t1\t1\t0\t0\t1\t4.0\n"
                                          + "7.0\t0:00:07\tNA\t1\t1\t1\t0\t0\t1\t6.5\n")
    (tmp_path / "b.tsv").write_text(header + "2.0\t0:00:02\t50\t1\t1\t1\t0\t0\t1\t1.5\n")
    files = tsv.benchmark_files(tmp_path, ["a/*.tsv", "b.tsv", "none/*.tsv"])
    assert [f.name for f in files] == ["1.tsv", "b.tsv"]
    rows = tsv.last_rows(files)
    assert rows.rows() == [(7.0, 6.5, None), (2.0, 1.5, 50.0)]
    assert tsv.last_rows([]).columns == ["s", "cpu_time", "max_rss"]


@pytest.mark.slow
def test_bm25_matches_raw_pyserini_and_prints_the_ratios(shared_data):
    out = run_script("bench/bench_bm25", "--data-dir", shared_data, "--queries", 20, "--k", 5, "--threads", 1,
                     "--repeats", 1, "--heap", "1g", "--cqds-sample", 10)
    assert "same ranked docids as raw Pyserini for 20/20 queries" in out
    assert re.search(r"ratio pipeline/raw \(time\)\s+" + RATIO, out)
    assert re.search(r"ratio pipeline/per-pair \(time per pair\)\s+" + RATIO, out)
    assert float(re.search(r"max \|pipeline - compute_query_document_score\| = (\S+);", out).group(1)) < 1e-4


#: bf16's unit roundoff (8 significant bits): one bf16 step of a value x is at most 2 * BF16_U * |x|
BF16_U = 2.0**-8


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_encode_agrees_with_a_bare_transformers_loop(tmp_path, precision):
    """The pipeline's vectors equal a bare loop's under the same arithmetic, whichever ``auto`` is on this CPU (both
    resolutions run on every CPU: bf16 autocast is emulated where the CPU lacks it). Batches padded otherwise sum in
    another order: in fp32 that moves a unit vector's component by a few ulp of 1.0 (2^-23; bound 1e-5); in bf16 a
    hidden value can round to the neighbouring bf16 value, so the bound is one bf16 step of the largest component."""
    rows = ["QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel"]
    rows += [f"Q{i}\tquestion {i}?\tD{i}\ttitle\tD{i}-{j}\tsentence {j} of document {i} with a few words\t0"
             for i in range(4) for j in range(3)]
    (tmp_path / "wikiqa.tsv").write_text("\n".join(rows) + "\n")
    out = run_script("bench/bench_encode", "--data", tmp_path / "wikiqa.tsv", "--n", 12, "--batch-size", 4,
                     "--max-length", 16, "--layers", 1, "--threads", 1, "--precision", precision)
    assert out.startswith("texts: 12 WikiQA sentences from wikiqa.tsv")
    assert f"precision {precision}: {'bf16 autocast' if precision == 'bf16' else 'fp32'}" in out
    for variant in ("input order (naive)", "sorted by length"):
        assert re.search(rf"ratio pipeline / {re.escape(variant)} bare loop: " + RATIO, out)
    naive, ordered, largest = map(float, re.search(
        r"max \|pipeline - naive\| = (\S+); max \|pipeline - sorted\| = (\S+); largest \|component\| (\S+)",
        out).groups())
    bound = 1e-5 if precision == "fp32" else 2 * BF16_U * largest
    assert naive <= bound and ordered <= bound, (naive, ordered, bound)


@pytest.mark.slow
@pytest.mark.parametrize("ranker", ["cross_encoder", "convknrm"])
def test_train_loop_and_the_bare_torch_loop_train_on_the_same_batches(ranker):
    out = run_script("bench/bench_train", "--ranker", ranker, "--steps", 4, "--train", 20, "--dev-queries", 2,
                     "--skip", 1, "--layers", 1, "--threads", 1)
    assert "pipeline train_ranker loop (sample+tokenise+train)" in out and "bare torch loop over pre-built" in out
    assert re.search(r"ratio pipeline / bare: " + RATIO, out)
    gap = float(re.search(r"\|difference\| (\S+) ", out).group(1))
    assert gap == 0.0 if ranker == "cross_encoder" else gap < 0.1  # ConvKNRM's dropout masks are drawn apart


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None,
                    reason="bench/bench_cross_encoder.py needs accelerate beside sentence-transformers (not a pipeline "
                           "dependency: pip install accelerate==1.15.0)")
def test_cross_encoder_loop_and_sentence_transformers_trainer_on_the_same_batches(tiny_tree):
    out = run_script("bench/bench_cross_encoder", "--root", tiny_tree, "--dataset", "tiny", "--layers", 1,
                     "--steps", 2, "--warmup", 1, "--dev-queries", 2, "--precision", "fp32", "--scratch",
                     tiny_tree / "scratch")
    rows = {r[0]: r for r in table_rows(out)[1:]}
    assert set(rows) == {"project", "sentence-transformers"}, out
    # both loops trained on the batches (an untrained binary head starts near ln 2) and scored the dev queries
    assert all(0.5 < float(r[4]) < 0.9 and 0.0 < float(r[6]) <= 1.0 for r in rows.values()), out
    assert re.search(r"fp32: project / sentence-transformers throughput = " + RATIO, out)


@pytest.mark.slow
def test_mc_dropout_prints_a_row_per_ranker_and_embedding_dropout(tiny_tree):
    out = run_script("bench/bench_mc_dropout", "--root", tiny_tree, "--pairs", 20, "--passes", 2, "--batch-size", 8)
    rows = table_rows(out)[1:]
    assert [(r[0], r[1]) for r in rows] == [("lstm_qa", "0.0"), ("lstm_qa", "0.5"), ("convknrm", "0.0"),
                                            ("convknrm", "0.5")]
    assert all(re.match(RATIO, r[4]) for r in rows)


@pytest.mark.slow
def test_teacher_score_prints_scoring_and_training_per_precision(tiny_tree):
    out = run_script("bench/bench_teacher_score", "--root", tiny_tree, "--model",
                     tiny_tree / "results/tiny/teacher/model", "--pairs", 20, "--precision", "fp32", "--repeat", 1,
                     "--train-steps", 2, "--batch-size", 8, "--max-length", 16)
    assert re.search(r"scoring fp32 .* pairs/s\)", out) and re.search(r"training fp32 .* s/step", out)


@pytest.mark.slow
def test_floor_prints_every_stage_with_its_share_of_the_matmul_peak(tiny_tree):
    out = run_script("bench/floor", "--root", tiny_tree, "--config", tiny_tree / "tiny.yaml", "--repeats", 1,
                     "--batches", 1, "--dev-queries", 2, "--precision", "fp32")
    assert re.search(r"matmul peak GFLOP/s .*: fp32 x1 thread\(s\) \d+", out)
    stages = {line[:30].strip(): line.split()[-1] for line in out.splitlines() if re.search(r"%\s+\w+$", line)}
    assert set(stages) == {"teacher train step", "teacher scoring", "dense encoding, contexts",
                           "dense encoding, responses", "ConvKNRM train step", "ConvKNRM dev evaluation"}
    assert set(stages.values()) <= {"compute", "prep", "ops"}


@pytest.mark.slow
def test_prof_convknrm_times_each_component_of_a_step(tiny_tree):
    out = run_script("bench/prof_convknrm", "--root", tiny_tree, "--steps", 3, "--skip", 1, "--evals", 1,
                     "--dev-queries", 2)
    parts = dict(line.split()[:2] for line in out.splitlines() if re.match(r"  [a-zA-Z_]+\s+\d+\.\d+$", line))
    assert set(parts) >= {"sample", "encode", "collate", "forward", "backward", "optim", "zero_grad", "TOTAL"}
    assert "dev evaluation" in out


@pytest.mark.slow
def test_bench_convknrm_times_both_codes_on_the_same_batches_and_prints_their_ratios(tiny_tree):
    """Against the committed code (HEAD) on the same batches: a table row per variant, a ratio per measured part,
    and the agreement of the two variants' losses and dev scores."""
    out = run_script("bench/bench_convknrm", "--root", tiny_tree, "--steps", 2, "--rounds", 2, "--dev-queries", 2)
    assert {r[0] for r in table_rows(out)} >= {"base HEAD", "this checkout"}
    for part in ("training step", "dev evaluation"):
        assert re.search(rf"speed ratio base HEAD / this checkout, {part} \(thread CPU time\): " + RATIO, out)
    assert re.search(r"max \|loss difference\| over 2 steps: \S+; max \|dev score difference\| over \d+ pairs", out)
    assert "CPU flags:" in out


@pytest.mark.slow
def test_plan_cluster_prints_every_stage_and_the_slurm_requests(tiny_tree):
    rows = table_rows(run_script("bench/plan_cluster", "--run", tiny_tree))
    assert {"ingest", "dense_neighbors (k=1000)", "teacher_score"} <= {r[0] for r in rows}
    requests = run_script("bench/plan_cluster", "--run", tiny_tree, "--resources").splitlines()
    assert any(re.match(r"  ingest: \{mem_mb: \d+, runtime: \d+\}", line) for line in requests)


@pytest.mark.slow
def test_scale_reads_each_size_folders_benchmark_files(tiny_tree, tmp_path):
    for size in ("docs100", "docs300"):  # two sizes of different query counts, each folder the tiny run
        (tmp_path / size).symlink_to(tiny_tree, target_is_directory=True)
    out = run_script("bench/bench_scale", "--docs", 100, 300, "--workdir", tmp_path, "--table-only")
    rows = table_rows(out)
    assert rows[0][0] == "job" and len(rows[0]) == 2 + 3
    assert {"ingest", "dense_neighbors", "teacher_train"} <= {r[0] for r in rows[1:]}
