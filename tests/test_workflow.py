"""The Snakemake workflow itself, run as a user would, in a temporary working directory."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from curricula.plumbing.contracts import CANDIDATES, DOCS, QRELS, QUERIES, read_table
from curricula.plumbing.layout import Layout
from tests.conftest import shared_file
from tests.workflow_run import PRECOMPUTED, TINY, TINY_PRECOMPUTE, copy_run, dry_jobs, jobs_of, snakemake

pytestmark = pytest.mark.slow  # Snakemake runs of the tiny workflow


def test_dry_run_lists_the_dag(tmp_path):
    out = snakemake(tmp_path, "-n")
    assert out.returncode == 0, out.stderr
    assert "ingest" in out.stdout


def test_ingest_runs_and_second_run_does_nothing(tmp_path):
    out = snakemake(tmp_path, "--until", "ingest", config=TINY)
    assert out.returncode == 0, out.stderr
    data = tmp_path / "results" / "tiny" / "data"
    tables = {name: read_table(data / f"{name}.parquet", spec) for name, spec in
              [("queries", QUERIES), ("docs", DOCS), ("qrels", QRELS), ("candidates", CANDIDATES)]}
    assert tables["queries"].group_by("split").len().sort("split")["len"].to_list() == [10, 10, 40]
    assert (tmp_path / "logs" / "tiny" / "ingest.log").read_text().count("wrote") == 4
    assert (tmp_path / "benchmarks" / "tiny" / "ingest.tsv").exists()
    # plain Snakemake ends with the run's summary (the Snakefile's onsuccess), split sizes included
    assert "Outputs of dataset 'tiny' are under results/tiny/" in out.stdout
    assert "queries per split (as ingested, after dataset.keep_queries): train 40, dev 10, test 10" in out.stdout
    again = snakemake(tmp_path, "--until", "ingest", config=TINY)
    assert again.returncode == 0 and jobs_of(again.stdout + again.stderr) == set(), again.stderr


def test_a_second_run_from_scratch_with_every_stage_sharded_gives_identical_bytes(request, tmp_path):
    """Same config and seed, identical outputs; scatter-gather shards change nothing. A second run of the tiny
    workflow from an empty folder, with 3 shards (first, middle and last) of BM25 search and scoring, encoding,
    neighbours and teacher scoring, gives every table, run file, model, report table and figure of the session's
    unsharded tiny run byte for byte; its shard files are temporary and every shard has its log. One run from scratch
    holds both promises (a shard count is not a result-changing knob), where two runs held them before. (The shared
    run is asked for after this one has finished, so the two can be built at the same time by two workers.)"""
    b = tmp_path / "b"
    b.mkdir()
    sharded = {**TINY_PRECOMPUTE, "shards": {"bm25": 3, "encode": 3, "neighbors": 3, "teacher": 3}}
    out = snakemake(b, config=sharded)
    assert out.returncode == 0, out.stderr[-3000:]
    a = request.getfixturevalue("tiny_run")
    tables = sorted(p.relative_to(a) for p in (a / "results").rglob("*.parquet"))
    assert tables == sorted(p.relative_to(b) for p in (b / "results").rglob("*.parquet"))
    # ingest 4, bm25 2 + tuned 2, dense 3 + positive ranks 1, teacher 1, difficulty 12 + 1, curriculum (shard +
    # index), dev curve, test metrics + additive metrics + additivity grid, reference metrics 3 (+ the teacher's
    # additive 2), report tables 3 (seeds, metrics, power)
    assert len(tables) == 4 + 4 + 4 + 1 + 13 + 2 + 1 + 3 + 5 + 3
    exp = Path("results/tiny/experiments/baseline/seed=1")
    tables += [Path("results/tiny/bm25/run.trec"), exp / "model" / "model.safetensors", exp / "test.run",
               Path("results/tiny/report/table_seeds.md"), Path("results/tiny/report/figures/dev_curves.png")]
    assert {f"results/tiny/{rel}" for rel in PRECOMPUTED} <= {str(t) for t in tables}  # the sharded stages'
    for rel in tables:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    logs = b / "logs" / "tiny"
    assert sorted(p.name for p in (logs / "bm25_run_shard").iterdir()) == [f"{i}-of-3.log" for i in range(1, 4)]
    assert len(list((logs / "dense_encode_shard").iterdir())) == 6  # queries and docs, 3 shards each
    assert not list((b / "results/tiny").rglob("shards/*.parquet"))
    # the command-line override needs no config edit: the teacher's scoring is planned in two shards
    targets = [f"results/tiny/{rel}" for rel in PRECOMPUTED]
    out = snakemake(b, *targets, "--set-scatter", "teacher=2", "-n", config=TINY_PRECOMPUTE)
    assert out.returncode == 0 and jobs_of(out.stdout) >= {"teacher_score_shard", "teacher_score"}, out.stderr[-2000:]


def test_bad_config_stops_before_any_job_with_one_line_per_error(tmp_path):
    bad = {"dataset": {**TINY["dataset"], "optoins": {}}, "train": {"eval_evry": 5}}
    out = snakemake(tmp_path, config=bad)
    assert out.returncode != 0
    # the last lines on the screen are the errors, one each, naming the key and the overlay file (relative to the
    # working directory, --directory); no traceback
    overlay = "config.test.yaml"
    assert out.stderr.strip().splitlines()[-2:] == [
        f"config: dataset.optoins: unknown key (did you mean options?) (set in {overlay})",
        f"config: train.eval_evry: unknown key (did you mean eval_every?) (set in {overlay})"]
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) < 10
    assert not (tmp_path / "results").exists()


def test_an_unregistered_difficulty_function_stops_before_any_job(tmp_path):
    out = snakemake(tmp_path, "-n", config={**TINY, "difficulty": {"functions": ["random", "nope"]}})
    assert out.returncode != 0
    assert "difficulty.functions: unknown difficulty function(s) ['nope']" in out.stderr + out.stdout


def test_broken_input_fails_with_position_and_leaves_no_parquet(tmp_path):
    broken = tmp_path / "dataset.json"
    broken.write_text('{\n "x": {"messages": [[{"text": "hi", "sender": "a"}]],\n}\n')
    cfg = {"dataset": {**TINY["dataset"], "files": {"json": str(broken)}}}
    out = snakemake(tmp_path, config=cfg)
    assert out.returncode != 0
    log = (tmp_path / "logs" / "tiny" / "ingest.log").read_text()
    assert f"{broken}:3: invalid JSON" in log
    # the screen ends on the message and the job's log, with no traceback
    assert out.stderr.strip().splitlines()[-1].startswith(f"error in rule ingest: {broken}:3: invalid JSON")
    assert out.stderr.strip().endswith("(log: logs/tiny/ingest.log)") and "Traceback" not in out.stderr
    data = tmp_path / "results" / "tiny" / "data"
    assert not data.exists() or not any(data.iterdir())


def test_precompute_stages_run_and_rerun_only_what_a_knob_touches(tiny_run, tmp_path):
    wd = copy_run(tiny_run, tmp_path / "run")  # a copied run is still up to date (checked below)
    res = wd / "results" / "tiny"
    for rel in ("bm25/index", "bm25/run.parquet", "bm25/run.trec", "bm25/candidate_scores.parquet",
                "dense/queries.parquet", "dense/docs.parquet", "dense/neighbors.parquet",
                "dense/positive_ranks.parquet"):
        assert (res / rel).exists(), rel
    for rel in ("teacher/model", "teacher/scores.parquet", "difficulty/difficulty.parquet"):
        assert (res / rel).exists(), rel
    for rule in ("bm25_index", "bm25_run", "bm25_candidate_scores", "dense_encode_queries", "dense_encode_docs",
                 "dense_neighbors", "dense_positive_ranks", "teacher_train", "teacher_score", "difficulty"):
        assert (wd / "logs" / "tiny" / f"{rule}.log").exists(), rule
    assert dry_jobs(wd, TINY_PRECOMPUTE) == set()
    # BM25 depth: only the run; a BM25 thread count: nothing; a dense knob: only dense rules
    deeper = {**TINY_PRECOMPUTE, "bm25": {**TINY_PRECOMPUTE["bm25"], "k": 25, "threads": 1}}
    # the BM25 run feeds the difficulty table (D_recip/norm/kde read the candidates' run by default: no)
    assert dry_jobs(wd, deeper) == {"bm25_run_shard", "bm25_run", "all"}
    nk = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "neighbors_k": 40}}
    assert dry_jobs(wd, nk) == {"dense_neighbors_shard", "dense_neighbors", "dense_positive_ranks", "all"}
    ml = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "max_length": 40}}
    assert dry_jobs(wd, ml) == {"dense_encode_shard", "dense_encode", "dense_neighbors_shard", "dense_neighbors",
                                "dense_positive_ranks", "difficulty_function", "difficulty", "all"}


def assert_downstream_outputs(res: Path) -> None:
    """The downstream grid's results in ``res`` (a dataset's results folder): the difficulty table of the three
    functions, both seeds' models and curves of the three experiments, their runs and metrics, the report's tables
    and figures."""
    table = pl.read_parquet(res / "difficulty" / "difficulty.parquet")
    assert {"random", "u_words", "bert_loss"} <= set(table.columns)
    assert "sigma_bm25" not in table.columns
    for name in ("baseline", "loss_root2", "words_weighted"):
        for seed in (1, 2):
            run = res / "experiments" / name / f"seed={seed}"
            assert (run / "model" / "model.safetensors").exists() and (run / "config.json").exists()
            assert pl.read_parquet(run / "dev_curve.parquet")["step"].to_list() == [2, 4]
            assert not (run / "model.checkpoint").exists()
    assert sorted(p.name for p in (res / "curricula").iterdir()) == ["bert_loss", "random"]
    for name in ("baseline", "loss_root2", "words_weighted"):
        run = res / "experiments" / name / "seed=1"
        assert (run / "test.run").read_text().count(" Q0 ") == 10 * 10  # 10 test queries x 10 candidates
        assert {"AP", "RR@10", "R10@1", "R2@1"} <= set(pl.read_parquet(run / "metrics.parquet")["measure"])
    seeds_md = (res / "report" / "table_seeds.md").read_text()
    assert "| row | baseline | loss_root2 | words_weighted |" in seeds_md and "| AVG |" in seeds_md
    metrics = pl.read_parquet(res / "report" / "table_metrics.parquet")
    assert metrics["ranker"].to_list() == ["baseline", "loss_root2", "words_weighted", "baseline+bm25",
                                           "loss_root2+bm25", "words_weighted+bm25", "bm25", "bm25_tuned", "teacher",
                                           "teacher+bm25"]
    figures = sorted(p.name for p in (res / "report" / "figures").glob("*.png"))
    assert figures == ["by_difficulty_bert_loss.png", "by_turns.png", "dev_curves.png", "pacing.png"]


def assert_knobs_plan_only_their_jobs(wd: Path, few: dict) -> None:
    """Dry runs on the finished downstream grid ``few`` in ``wd``: each changed knob plans only the jobs it touches
    (a scoring function added, the teacher's folds and steps, a function dropped, one experiment's pacing, a thread
    count)."""
    more = {**few, "difficulty": {"functions": ["random", "u_words", "bert_loss", "sigma_bm25"]}}
    out = snakemake(wd, "-n", config=more)
    assert jobs_of(out.stdout) == {"difficulty_function", "difficulty", "all"}
    assert out.stdout.count("rule difficulty_function:") == 1
    folds = {**few, "teacher": {**few["teacher"], "folds": 2, "threads": 1}}
    # the teacher's scores feed bert_loss, hence its curriculum and the experiment ordered by it
    assert dry_jobs(wd, folds) == {"teacher_score_shard", "teacher_score", "difficulty_function", "difficulty",
                                   "curriculum", "train", "evaluate", "evaluate_reference_additive",
                                   "difficulty_test", "report_tables", "report_figures", "all"}
    steps = {**few, "teacher": {**few["teacher"], "steps": 7}}
    assert "teacher_train" in dry_jobs(wd, steps)
    # dropping bert_loss from the table: only the combined table is rebuilt, nothing waits for the teacher
    no_teacher = {**few, "difficulty": {"functions": ["random", "u_words"]}}
    assert dry_jobs(wd, no_teacher) == {"difficulty", "all"}
    # one experiment's pacing: only its two train and evaluate jobs (one per seed), then the report
    paced = {**few, "experiments": {**few["experiments"], "loss_root2": {"scoring": "bert_loss",
                                                                           "pacing": {"name": "root_5"}}}}
    out = snakemake(wd, "-n", config=paced)
    assert jobs_of(out.stdout) == {"train", "evaluate", "report_tables", "report_figures", "all"}
    assert sorted(set(re.findall(r"experiment=(\w+), seed=(\d)", out.stdout))) == [("loss_root2", "1"),
                                                                                  ("loss_root2", "2")]
    # a thread count is not a result-changing knob
    threads = {**few, "train": {**few["train"], "threads": 1}}
    assert dry_jobs(wd, threads) == set()


def test_downstream_stages_rerun_only_what_a_knob_touches(tiny_run, tmp_path):
    """On the tiny run's upstream tables (its BM25, teacher and difficulty functions reused): two experiments and a
    second seed train, ordered and weighted by three difficulty functions. Adding a scoring function never retrains
    the teacher; one experiment's pacing re-runs only its jobs."""
    tiny = Layout(dataset="tiny")
    wd = copy_run(tiny_run, tmp_path / "run")
    shutil.rmtree(wd / tiny.report_dir)  # the tiny run's figures: this grid's are asserted below
    (wd / tiny.difficulty_function("sigma_bm25")).unlink()  # as if never scored: added to the list below
    few = {**TINY_PRECOMPUTE, "difficulty": {"functions": ["random", "u_words", "bert_loss"]}, "seeds": [1, 2],
           "experiments": {"loss_root2": {"scoring": "bert_loss", "pacing": {"name": "root_2"}},
                           "words_weighted": {"weighting": {"scoring": "u_words", "m": 2}, "loss": "hinge"}}}
    planned = jobs_of(snakemake(wd, "-n", config=few).stdout)
    assert not planned & {"ingest", "bm25_index", "teacher_train", "teacher_score", "difficulty_function"}, planned
    out = snakemake(wd, config=few)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_downstream_outputs(wd / "results" / "tiny")
    html = wd / "report.html"
    out = snakemake(wd, "--report", str(html), config=few)
    assert out.returncode == 0 and html.stat().st_size > 10_000, out.stderr[-2000:]
    assert dry_jobs(wd, few) == set()  # a second invocation schedules nothing
    assert_knobs_plan_only_their_jobs(wd, few)


def test_bad_experiment_stops_before_any_job(tmp_path):
    bad = {**TINY_PRECOMPUTE, "experiments": {"w": {"weighting": {"scoring": "kde"}, "negatives": {"mode": "random"}}}}
    out = snakemake(tmp_path, config=bad)
    assert out.returncode != 0
    assert "experiments.w" in out.stderr + out.stdout and "negatives.mode: candidates" in out.stderr + out.stdout
    assert not (tmp_path / "results").exists()


def planned_jobs(dry_run_output: str) -> list[dict[str, str]]:
    """The jobs of a dry run's listing: {"rule": name, "input": ..., "wildcards": ...} per job block."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run_output):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if head:
            fields = dict(re.findall(r"^\s+(\w+): (.*)$", block, flags=re.M))
            jobs.append({"rule": head.group(1), **fields})
    return jobs


def test_macavaney_weights_on_bm25_negatives_plan_a_difficulty_job_on_the_run(tmp_path):
    """difficulty.bm25_list: run with an arm weighted by recip on negatives {mode: bm25}: recip's difficulty job
    reads the BM25 run (its table then covers the run's pairs), and the arm's train job reads that table and the
    run. With the candidates' list, or negatives deeper than bm25.k, the config stops before any job."""
    arm = {"weighting": {"scoring": "recip", "m": 2, "iteration_steps": 2}, "negatives": {"mode": "bm25", "depth": 20}}
    cfg = {**TINY_PRECOMPUTE, "difficulty": {"bm25_list": "run", "functions": ["recip", "turns"]},
           "experiments": {"w": arm}}
    out = snakemake(tmp_path, "-n", config=cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = planned_jobs(out.stdout)
    recip = [j for j in jobs if j["rule"] == "difficulty_function" and j.get("wildcards") == "function=recip"]
    assert len(recip) == 1 and "results/tiny/bm25/run.parquet" in recip[0]["input"].split(", ")
    turns = [j for j in jobs if j["rule"] == "difficulty_function" and j.get("wildcards") == "function=turns"]
    assert len(turns) == 1 and "run.parquet" not in turns[0]["input"]  # a query-level function: no run
    train = [j for j in jobs if j["rule"] == "train" and "experiment=w," in j.get("wildcards", "")]
    assert len(train) == 1
    assert {"results/tiny/difficulty/functions/recip.parquet", "results/tiny/bm25/run.parquet"} <= set(
        train[0]["input"].split(", "))
    for bad, message in (({**cfg, "difficulty": {"bm25_list": "candidates"}}, "difficulty.bm25_list: run"),
                         ({**cfg, "experiments": {"w": {**arm, "negatives": {"mode": "bm25"}}}}, "bm25.k: 20")):
        refused = snakemake(tmp_path, "-n", config=bad)
        assert refused.returncode != 0 and "experiments.w" in refused.stderr + refused.stdout
        assert message in refused.stderr + refused.stdout


def test_biencoder_fine_tuning_is_wired_in_only_when_enabled(tiny_plans):
    """The dry runs of the tiny config as is and with dense.finetune.enabled (tests.workflow_run.PLANNED)."""
    assert "dense_biencoder" not in jobs_of(tiny_plans["tiny"])
    assert {"dense_biencoder", "dense_encode"} <= jobs_of(tiny_plans["finetuned"])


def test_positive_ranks_are_reported_wherever_the_neighbours_are_built(tiny_plans, tmp_path):
    """Rule dense_positive_ranks (where G ranks the true replies) is a final target beside the neighbours, with G
    as shipped and fine-tuned; asking for the neighbours alone does not run it."""
    assert {"dense_neighbors", "dense_positive_ranks"} <= jobs_of(tiny_plans["tiny"])
    assert {"dense_biencoder", "dense_neighbors", "dense_positive_ranks"} <= jobs_of(tiny_plans["finetuned"])
    out = snakemake(tmp_path, "-n", "results/tiny/dense/neighbors.parquet", config=TINY_PRECOMPUTE)
    assert out.returncode == 0 and "dense_positive_ranks" not in jobs_of(out.stdout), out.stderr[-2000:]
    assert "dense_neighbors" in jobs_of(out.stdout)


def test_readme_wikiqa_overlay_runs_ingest_and_a_touched_data_file_reruns_nothing(tmp_path, shared_data):
    """README.md's example (Configure a run; the formats: docs/datasets.md): a --configfile naming another dataset
    replaces the default's dataset section. A data file that only got a new modification time (a re-copied data
    folder) re-runs nothing (docs/pipeline.md): the workflow profile (profiles/default) has Snakemake compare the
    checksum of files up to 256 MB; at its 1 MB default the 4.4 MB WikiQA-train.tsv re-ran ingest and every stage
    after it."""
    data = tmp_path / "data"  # copies, so the test can re-stamp them
    data.mkdir()
    for name in ("WikiQA-train.tsv", "WikiQA-dev.tsv"):
        shutil.copyfile(shared_file(shared_data, "wikiqa", name), data / name)
    wiki = {"dataset": {"name": "wikiqa", "format": "wikiqa",
                        "files": {"train": str(data / "WikiQA-train.tsv"), "dev": str(data / "WikiQA-dev.tsv")},
                        "keep_queries": "with_positive_and_negative"}}
    out = snakemake(tmp_path, "--until", "ingest", config=wiki)
    assert out.returncode == 0, out.stderr[-3000:]
    queries = read_table(tmp_path / "results" / "wikiqa" / "data" / "queries.parquet", QUERIES)
    assert queries.filter(pl.col("split") == "dev").height == 122
    later = (data / "WikiQA-train.tsv").stat().st_mtime + 3600
    for path in data.iterdir():
        os.utime(path, (later, later))
    again = snakemake(tmp_path, "-n", "--until", "ingest", config=wiki)
    assert again.returncode == 0 and jobs_of(again.stdout) == set(), again.stdout[-3000:]
    with open(data / "WikiQA-dev.tsv", "a") as f:  # a changed file still re-runs ingest
        f.write("Q9999\tquestion?\tD9999\ttitle\tD9999-0\tanswer.\t1\n")
    assert jobs_of(snakemake(tmp_path, "-n", "--until", "ingest", config=wiki).stdout) == {"ingest"}


def test_active_learning_dag_writes_curves_table_and_figure(tmp_path):
    cfg = {**TINY, "dense": TINY_PRECOMPUTE["dense"],
           "active": {"enabled": True, "methods": ["random", "coreset", "dasl", "all"], "seeds": [1], "rounds": 2,
                      "initial": 0.2, "budget": 0.2, "passes": 3, "spl_iterations": 2,
                      "train": {"steps": 3, "eval_every": 3, "batch_size": 4,
                                "architecture": {"channels": 8, "hidden": 8, "query_length": 16, "doc_length": 16}}}}
    out = snakemake(tmp_path, "report_active", config=cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    assert jobs_of(out.stdout + out.stderr) >= {"ingest", "dense_encode", "active", "report_active"}
    assert "teacher_train" not in out.stdout + out.stderr  # only what active learning needs
    root = tmp_path / "results" / "tiny"
    from curricula.active.loop import ACTIVE_CURVE

    curve = read_table(root / "active" / "dasl" / "seed=1" / "curve.parquet", ACTIVE_CURVE)
    assert curve["labeled"].to_list() == [8, 16]  # 20% of 40 train queries, then +20%
    assert not (root / "active" / "dasl" / "seed=1" / "state").exists()  # cleared after a finished job
    assert read_table(root / "active" / "all" / "seed=1" / "curve.parquet", ACTIVE_CURVE)["labeled"].to_list() == [40]
    table = pl.read_csv(root / "report" / "table_active.csv")
    assert sorted(table["method"].to_list()) == ["coreset", "dasl", "random"]
    curves = pl.read_csv(root / "report" / "curves_active.csv")
    assert curves.filter(pl.col("method") == "dasl")["labeled_fraction"].to_list() == pytest.approx([0.2, 0.4])
    assert (root / "report" / "figures_active" / "learning_curves.png").stat().st_size > 1000
    again = snakemake(tmp_path, "report_active", config=cfg)
    assert again.returncode == 0 and jobs_of(again.stdout + again.stderr) == set(), again.stderr[-2000:]


def test_a_tuned_list_trains_each_value_and_adding_one_schedules_only_its_jobs(tiny_run, tmp_path):
    """weighting.m: [1, 2] trains one run per value, selects on dev, evaluates the chosen one only; adding 4 to the
    list schedules that value's train job plus the selection, its test evaluation and the reports."""
    wd = copy_run(tiny_run, tmp_path / "run")
    tuned = {**TINY_PRECOMPUTE, "experiments": {"weighted": {"weighting": {"scoring": "u_words", "m": [1, 2]}}},
             "difficulty": {"functions": ["random", "u_words"]}}
    out = snakemake(wd, config=tuned)
    assert out.returncode == 0, out.stderr[-3000:]
    res = wd / "results" / "tiny" / "experiments"
    assert sorted(p.name for p in res.iterdir()) == ["baseline", "weighted", "weighted@weighting.m=1",
                                                    "weighted@weighting.m=2"]
    chosen = pl.read_parquet(res / "weighted" / "seed=1" / "selection.parquet")
    assert chosen["run"].to_list() == ["weighted@weighting.m=1", "weighted@weighting.m=2"]
    winner = chosen.filter(pl.col("chosen"))["run"][0]
    assert chosen.filter(pl.col("chosen"))["dev_value"][0] == chosen["dev_value"].max()
    assert pl.read_parquet(res / "weighted" / "seed=1" / "dev_curve.parquet").equals(
        pl.read_parquet(res / winner / "seed=1" / "dev_curve.parquet"))
    assert (res / "weighted" / "seed=1" / "metrics.parquet").exists()
    assert not (res / winner / "seed=1" / "metrics.parquet").exists()  # runs are never evaluated on test
    table = (wd / "results" / "tiny" / "report" / "table_tuning.md").read_text()
    assert "weighting.m=1" in table and "weighting.m=2" in table and "chosen" in table
    more = {**tuned, "experiments": {"weighted": {"weighting": {"scoring": "u_words", "m": [1, 2, 4]}}}}
    out = snakemake(wd, "-n", config=more)
    assert jobs_of(out.stdout) == {"train", "select_tuned", "evaluate", "report_tables", "report_figures",
                                   "report_tuning", "all"}
    assert set(re.findall(r"experiment=([\w.@=]+), seed=1", out.stdout)) == {"weighted@weighting.m=4", "weighted"}
    assert out.stdout.count("rule train:") == 1
