"""The Snakemake workflow itself, run as a user would, in a temporary working directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import yaml

from curricula.tables import CANDIDATES, DOCS, QRELS, QUERIES, read_table

REPO = Path(__file__).resolve().parents[1]
TINY = {"dataset": {"name": "tiny", "format": "chitchat",
                    "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}, "max_context_turns": 4}}}


TINY_PRECOMPUTE = {
    **TINY,
    "bm25": {"k": 20, "heap": "1g"},
    "dense": {"layers": 1, "max_length": 32, "batch_size": 32, "neighbors_k": 30},
    "teacher": {"layers": 1, "max_length": 32, "steps": 6, "batch_size": 8},
    "train": {"layers": 1, "max_length": 32, "steps": 4, "batch_size": 4, "eval_every": 2, "checkpoint_every": 2},
    "seeds": [1],
    "experiments": {},  # the baseline alone (an overlay's experiments replace the default grid)
}


def snakemake(workdir: Path, *args: str, config: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", *args]
    if config is not None:  # last: --configfile takes every following word as a file
        path = workdir / "config.test.yaml"
        path.write_text(yaml.safe_dump(config))
        cmd += ["--configfile", str(path)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


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
    again = snakemake(tmp_path, "--until", "ingest", config=TINY)
    assert again.returncode == 0 and jobs_of(again.stdout + again.stderr) == set(), again.stderr


def test_same_config_gives_identical_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for wd in (a, b):
        wd.mkdir()
        out = snakemake(wd, config=TINY_PRECOMPUTE)
        assert out.returncode == 0, out.stderr[-3000:]
    tables = sorted(p.relative_to(a) for p in (a / "results").rglob("*.parquet"))
    assert tables == sorted(p.relative_to(b) for p in (b / "results").rglob("*.parquet"))
    # ingest 4, bm25 2, dense 3, teacher 1, difficulty 12 + 1, curriculum (shard + index), dev curve, test
    # metrics, reference metrics 2, report tables 2
    assert len(tables) == 4 + 2 + 3 + 1 + 13 + 2 + 1 + 1 + 2 + 2
    exp = Path("results/tiny/experiments/baseline/seed=1")
    tables += [Path("results/tiny/bm25/run.trec"), exp / "model" / "model.safetensors", exp / "test.run",
               Path("results/tiny/report/table_seeds.md"), Path("results/tiny/report/figures/dev_curves.png")]
    for rel in tables:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_bad_config_stops_before_any_job(tmp_path):
    bad = {"dataset": {**TINY["dataset"], "optoins": {}}}
    out = snakemake(tmp_path, config=bad)
    assert out.returncode != 0
    assert "'optoins' was unexpected" in out.stderr + out.stdout
    assert not (tmp_path / "results").exists()


def test_broken_input_fails_with_position_and_leaves_no_parquet(tmp_path):
    broken = tmp_path / "dataset.json"
    broken.write_text('{\n "x": {"messages": [[{"text": "hi", "sender": "a"}]],\n}\n')
    cfg = {"dataset": {**TINY["dataset"], "files": {"json": str(broken)}}}
    out = snakemake(tmp_path, config=cfg)
    assert out.returncode != 0
    log = (tmp_path / "logs" / "tiny" / "ingest.log").read_text()
    assert f"{broken}:3: invalid JSON" in log
    data = tmp_path / "results" / "tiny" / "data"
    assert not data.exists() or not any(data.iterdir())


def jobs_of(dry_run_output: str) -> set[str]:
    """Rule names of the jobs a (dry) run would run, from its 'Job stats' table (none when it has no table)."""
    if "Job stats:" not in dry_run_output:
        return set()
    lines = dry_run_output.split("Job stats:")[-1].splitlines()
    return {ln.split()[0] for ln in lines[3:] if ln.strip() and ln.split()[0] not in ("total",)
            and len(ln.split()) == 2 and ln.split()[1].isdigit()}


def dry_jobs(workdir: Path, config: dict) -> set[str]:
    out = snakemake(workdir, "-n", config=config)
    assert out.returncode == 0, out.stderr[-3000:]
    return jobs_of(out.stdout)


def test_precompute_stages_run_and_rerun_only_what_a_knob_touches(tmp_path):
    out = snakemake(tmp_path, config=TINY_PRECOMPUTE)
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "tiny"
    for rel in ("bm25/index", "bm25/run.parquet", "bm25/run.trec", "bm25/candidate_scores.parquet",
                "dense/queries.parquet", "dense/docs.parquet", "dense/neighbors.parquet"):
        assert (res / rel).exists(), rel
    for rel in ("teacher/model", "teacher/scores.parquet", "difficulty/difficulty.parquet"):
        assert (res / rel).exists(), rel
    for rule in ("bm25_index", "bm25_run", "bm25_candidate_scores", "dense_encode_queries", "dense_encode_docs",
                 "dense_neighbors", "teacher_train", "teacher_score", "difficulty"):
        assert (tmp_path / "logs" / "tiny" / f"{rule}.log").exists(), rule
    assert dry_jobs(tmp_path, TINY_PRECOMPUTE) == set()
    # BM25 depth: only the run; a BM25 thread count: nothing; a dense knob: only dense rules
    deeper = {**TINY_PRECOMPUTE, "bm25": {**TINY_PRECOMPUTE["bm25"], "k": 25, "threads": 1}}
    # the BM25 run feeds the difficulty table (D_recip/norm/kde read the candidates' run by default: no)
    assert dry_jobs(tmp_path, deeper) == {"bm25_run_shard", "bm25_run", "all"}
    nk = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "neighbors_k": 40}}
    assert dry_jobs(tmp_path, nk) == {"dense_neighbors_shard", "dense_neighbors", "all"}
    ml = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "max_length": 40}}
    assert dry_jobs(tmp_path, ml) == {"dense_encode_shard", "dense_encode", "dense_neighbors_shard", "dense_neighbors",
                                      "difficulty_function", "difficulty", "all"}


PRECOMPUTED = ("bm25/run.parquet", "bm25/run.trec", "bm25/candidate_scores.parquet", "dense/queries.parquet",
               "dense/docs.parquet", "dense/neighbors.parquet", "teacher/scores.parquet")


def test_sharded_precompute_gathers_the_unsharded_tables(tmp_path):
    """scattergather: 1 and 4 shards of BM25 search and scoring, encoding, neighbours and teacher scoring give
    byte-identical tables, and the shard files are temporary."""
    cfg = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "batch_size": 8}}
    targets = [f"results/tiny/{rel}" for rel in PRECOMPUTED]
    one, four = tmp_path / "one", tmp_path / "four"
    for wd, shards in ((one, 1), (four, 4)):
        wd.mkdir()
        sharded = {**cfg, "shards": {"bm25": shards, "encode": shards, "neighbors": shards, "teacher": shards}}
        out = snakemake(wd, *targets, config=sharded)
        assert out.returncode == 0, out.stderr[-3000:]
    for rel in PRECOMPUTED:
        assert (one / "results/tiny" / rel).read_bytes() == (four / "results/tiny" / rel).read_bytes(), rel
    logs = four / "logs" / "tiny"
    assert sorted(p.name for p in (logs / "bm25_run_shard").iterdir()) == [f"{i}-of-4.log" for i in range(1, 5)]
    assert len(list((logs / "dense_encode_shard").iterdir())) == 8  # queries and docs, 4 shards each
    assert not list((four / "results/tiny").rglob("shards/*.parquet"))
    # the command-line override needs no config edit; the same tables come back
    out = snakemake(four, *targets, "--set-scatter", "teacher=2", "-n", config=cfg)
    assert out.returncode == 0 and jobs_of(out.stdout) >= {"teacher_score_shard", "teacher_score"}, out.stderr[-2000:]


def test_downstream_stages_rerun_only_what_a_knob_touches(tmp_path):
    """Adding a scoring function never retrains the teacher; one experiment's pacing re-runs only its jobs."""
    few = {**TINY_PRECOMPUTE, "difficulty": {"functions": ["random", "u_words", "bert_loss"]}, "seeds": [1, 2],
           "experiments": {"loss_root2": {"scoring": "bert_loss", "pacing": {"name": "root_2"}},
                           "words_weighted": {"weighting": {"scoring": "u_words", "m": 2}, "loss": "hinge"}}}
    out = snakemake(tmp_path, config=few)
    assert out.returncode == 0, out.stderr[-3000:]
    res = tmp_path / "results" / "tiny"
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
    assert metrics["ranker"].to_list() == ["baseline", "loss_root2", "words_weighted", "bm25", "teacher"]
    figures = sorted(p.name for p in (res / "report" / "figures").glob("*.png"))
    assert figures == ["by_difficulty_bert_loss.png", "by_turns.png", "dev_curves.png", "pacing.png"]
    html = tmp_path / "report.html"
    out = snakemake(tmp_path, "--report", str(html), config=few)
    assert out.returncode == 0 and html.stat().st_size > 10_000, out.stderr[-2000:]
    assert dry_jobs(tmp_path, few) == set()  # a second invocation schedules nothing
    more = {**few, "difficulty": {"functions": ["random", "u_words", "bert_loss", "sigma_bm25"]}}
    out = snakemake(tmp_path, "-n", config=more)
    assert jobs_of(out.stdout) == {"difficulty_function", "difficulty", "all"}
    assert out.stdout.count("rule difficulty_function:") == 1
    folds = {**few, "teacher": {**few["teacher"], "folds": 2, "threads": 1}}
    # the teacher's scores feed bert_loss, hence its curriculum and the experiment ordered by it
    assert dry_jobs(tmp_path, folds) == {"teacher_score_shard", "teacher_score", "difficulty_function", "difficulty", "curriculum", "train",
                                         "evaluate", "evaluate_reference", "difficulty_test", "report_tables",
                                         "report_figures", "all"}
    steps = {**few, "teacher": {**few["teacher"], "steps": 7}}
    assert "teacher_train" in dry_jobs(tmp_path, steps)
    # dropping bert_loss from the table: only the combined table is rebuilt, nothing waits for the teacher
    no_teacher = {**few, "difficulty": {"functions": ["random", "u_words"]}}
    assert dry_jobs(tmp_path, no_teacher) == {"difficulty", "all"}
    # one experiment's pacing: only its two train and evaluate jobs (one per seed), then the report
    paced = {**few, "experiments": {**few["experiments"], "loss_root2": {"scoring": "bert_loss",
                                                                           "pacing": {"name": "root_5"}}}}
    out = snakemake(tmp_path, "-n", config=paced)
    assert jobs_of(out.stdout) == {"train", "evaluate", "report_tables", "report_figures", "all"}
    assert sorted(set(re.findall(r"experiment=(\w+), seed=(\d)", out.stdout))) == [("loss_root2", "1"),
                                                                                  ("loss_root2", "2")]
    # a thread count is not a result-changing knob
    threads = {**few, "train": {**few["train"], "threads": 1}}
    assert dry_jobs(tmp_path, threads) == set()


def test_bad_experiment_stops_before_any_job(tmp_path):
    bad = {**TINY_PRECOMPUTE, "experiments": {"w": {"weighting": {"scoring": "kde"}}}}
    out = snakemake(tmp_path, config=bad)
    assert out.returncode != 0
    assert "experiments.w" in out.stderr + out.stdout and "negatives.mode: candidates" in out.stderr + out.stdout
    assert not (tmp_path / "results").exists()


def test_biencoder_fine_tuning_is_wired_in_only_when_enabled(tmp_path):
    assert "dense_biencoder" not in dry_jobs(tmp_path, TINY_PRECOMPUTE)
    on = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "finetune": {"enabled": True}}}
    assert {"dense_biencoder", "dense_encode"} <= dry_jobs(tmp_path, on)


def test_readme_wikiqa_overlay_runs_ingest(tmp_path, shared_data):
    """The README's example: a --configfile naming another dataset replaces the default's dataset section."""
    wiki = {"dataset": {"name": "wikiqa", "format": "wikiqa",
                        "files": {"train": str(shared_data / "wikiqa" / "WikiQA-train.tsv"),
                                  "dev": str(shared_data / "wikiqa" / "WikiQA-dev.tsv")},
                        "keep_queries": "with_positive_and_negative"}}
    out = snakemake(tmp_path, "--until", "ingest", config=wiki)
    assert out.returncode == 0, out.stderr[-3000:]
    queries = read_table(tmp_path / "results" / "wikiqa" / "data" / "queries.parquet", QUERIES)
    assert queries.filter(pl.col("split") == "dev").height == 122


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
    from curricula.active_loop import ACTIVE_CURVE

    curve = read_table(root / "active" / "dasl" / "seed=1" / "curve.parquet", ACTIVE_CURVE)
    assert curve["labeled"].to_list() == [8, 16]  # 20% of 40 train queries, then +20%
    assert not (root / "active" / "dasl" / "seed=1" / "state").exists()  # cleared after a finished job
    assert read_table(root / "active" / "all" / "seed=1" / "curve.parquet", ACTIVE_CURVE)["labeled"].to_list() == [40]
    table = pl.read_csv(root / "report" / "table_active.csv")
    assert sorted(table["method"].to_list()) == ["coreset", "dasl", "random"]
    assert (root / "report" / "figures_active" / "learning_curves.png").stat().st_size > 1000
    again = snakemake(tmp_path, "report_active", config=cfg)
    assert again.returncode == 0 and jobs_of(again.stdout + again.stderr) == set(), again.stderr[-2000:]
