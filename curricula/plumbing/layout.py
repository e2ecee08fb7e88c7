"""Where every file of a run lives: the results tree, the study's own folder, and the logs and benchmarks folders.

One configured run writes under ``<results>/<dataset>/`` (:attr:`Layout.root`)::

    data/{queries,docs,qrels,candidates}.parquet            the ingest tables
    bm25/index, run.parquet, run.trec, candidate_scores.parquet, tuned/{grid,candidate_scores}.parquet
    dense/biencoder, {queries,docs}.parquet, neighbors.parquet, positive_ranks.parquet
    teacher/model, scores.parquet
    difficulty/difficulty.parquet, functions/<function>.parquet, test/<function>.parquet
    curricula/<scoring>/                                    one curriculum's shards
    <stage>/shards/<table>.<i>-of-<n>.parquet               the scatter shards (temporary)
    experiments/<experiment>/seed=<n>/                      model, dev_curve.parquet, config.json, selection.parquet,
                                                            test.run, metrics.parquet and the +bm25 ones
    references/<reference>/                                 a reference ranker's test.run and metrics
    active/<method>/seed=<n>/                               curve.parquet, test_metrics.parquet
    report/                                                 table_<name>.{csv,md,parquet}, figures/

A study's own outputs (round records, findings page) are under ``<results>/report/study/``, or
``<results>/report/study/only=<keys>/`` for a ``study.only`` selection (:attr:`Layout.study_name`); its ledger of
finished runs is under ``ledger/<study name>/`` (config ``study.ledger``), committed with the project. Logs and
benchmarks are under ``logs/<dataset>`` and ``benchmarks/<dataset>`` for the default results folder, under
``logs/<results, its path parts joined by _>/<dataset>`` for any other (:meth:`Layout.side`).

Every method takes the names that vary (experiment, seed, ...) as arguments whose defaults are Snakemake's wildcard
patterns (``"{experiment}"``), so a rule file's output pattern and an input function's concrete path come from one
place. Paths are strings (what Snakemake takes); the glob helpers at the end read the file system, nothing else does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = "results"
DEFAULT_LEDGER = "ledger"
STUDY = "study"
SELECTION = "only="
SIDE_KINDS = ("logs", "benchmarks")


def study_selection(datasets: Sequence[str], only: Sequence[str] | None) -> tuple[str, ...]:
    """The keys of a ``study.only`` selection, sorted (their listed order does not matter); ``()`` for the whole
    study (``only`` null, or listing every key of ``datasets``)."""
    if only is None or set(only) == set(datasets):
        return ()
    return tuple(sorted(only))


def replica_key(dataset: str, draw: int) -> str:
    """The key of a dataset's replica for a study's replication ``draw`` (1, 2...): ``<dataset>_rep<draw>``; it
    names the replica's results folder, its rules and, as a selection, its round records and ledger."""
    return f"{dataset}_rep{draw}"


def replication_selection(datasets: Sequence[str], only: Sequence[str] | None,
                          replication: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """The sorted replica keys (:func:`replica_key`) a ``study.replication`` runs: one per dataset its ``cells``
    lists among those ``study.only`` keeps (all of ``datasets`` when null); None without a replication."""
    if not replication:
        return None
    kept = datasets if only is None else [key for key in datasets if key in only]
    return tuple(sorted(replica_key(key, int(replication["draw"])) for key in kept
                        if key in (replication.get("cells") or {})))


def round_file(round_: int | str = "{round}") -> str:
    """The name of one round's record of a sequential study: ``round=<k>.json``."""
    return f"round={round_}.json"


def table_files(name: str, stem: str) -> dict[str, str]:
    """The files of one report table ``<stem>.{csv,md,parquet}``, keyed ``name``, ``name_md`` and ``name_parquet``
    (the CSV is the one the Snakemake report shows)."""
    return {name: f"{stem}.csv", f"{name}_md": f"{stem}.md", f"{name}_parquet": f"{stem}.parquet"}


@dataclass(frozen=True)
class Layout:
    """The paths of one run: ``results`` (config ``results``), ``dataset`` (config ``dataset.name``; a study's
    module each has its own), ``only`` (a study selection's keys, :func:`study_selection`) and ``ledger`` (config
    ``study.ledger``: the folder of the studies' ledgers, committed with the project)."""

    results: str = DEFAULT_RESULTS
    dataset: str = ""
    only: tuple[str, ...] = ()
    ledger: str = DEFAULT_LEDGER

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", str(Path(self.results)))  # "results/" and "./results" are "results"
        object.__setattr__(self, "only", tuple(self.only))
        object.__setattr__(self, "ledger", str(Path(self.ledger)))

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Layout:
        """The layout of a (validated or raw) config: its results folder, dataset name and study selection."""
        study = config.get("study") or {}
        datasets, chosen = list(study.get("datasets") or {}), study.get("only")
        replicas = replication_selection(datasets, chosen, study.get("replication"))
        only = study_selection(datasets, chosen) if replicas is None else replicas
        return cls(config.get("results", DEFAULT_RESULTS), (config.get("dataset") or {}).get("name", ""), only,
                   study.get("ledger") or DEFAULT_LEDGER)

    @classmethod
    def at(cls, root: str | Path) -> Layout:
        """The layout of a dataset's results folder ``root`` (``<results>/<dataset>``)."""
        root = Path(root)
        return cls(str(root.parent), root.name)

    # ------------------------------------------------------------------------------------------ one dataset
    @property
    def root(self) -> str:
        """``<results>/<dataset>``: where every stage of the run writes."""
        return str(Path(self.results, self.dataset))

    def data(self, name: str = "{kind}") -> str:
        """One ingest table (queries, docs, qrels or candidates)."""
        return f"{self.root}/data/{name}.parquet"

    def shard(self, stage: str, table: str, item: str = "{scatteritem}") -> str:
        """One scatter shard of a stage's table (``item`` is ``<i>-of-<n>``)."""
        return f"{self.root}/{stage}/shards/{table}.{item}.parquet"

    def bm25(self) -> dict[str, str]:
        """BM25's index, top-k run (Parquet and TREC), candidate scores, and the (k1, b) tuning's grid and scores."""
        out = f"{self.root}/bm25"
        return {"index": f"{out}/index", "run": f"{out}/run.parquet", "trec": f"{out}/run.trec",
                "candidate_scores": f"{out}/candidate_scores.parquet", "tuned_grid": f"{out}/tuned/grid.parquet",
                "tuned_scores": f"{out}/tuned/candidate_scores.parquet"}

    def dense_vectors(self, kind: str = "{kind}") -> str:
        """The dense vectors of the queries or the docs."""
        return f"{self.root}/dense/{kind}.parquet"

    def dense(self) -> dict[str, str]:
        """The fine-tuned bi-encoder, the query and doc vectors, the neighbours and where G ranks the true replies."""
        out = f"{self.root}/dense"
        return {"biencoder": f"{out}/biencoder", "queries": self.dense_vectors("queries"),
                "docs": self.dense_vectors("docs"), "neighbors": f"{out}/neighbors.parquet",
                "positive_ranks": f"{out}/positive_ranks.parquet"}

    def teacher(self) -> dict[str, str]:
        """The teacher cross-encoder and its scores of every candidate."""
        return {"model": f"{self.root}/teacher/model", "scores": f"{self.root}/teacher/scores.parquet"}

    @property
    def difficulty_table(self) -> str:
        """Every difficulty function's table joined (one row per training pair)."""
        return f"{self.root}/difficulty/difficulty.parquet"

    def difficulty_function(self, function: str = "{function}") -> str:
        """One difficulty function on the training pairs."""
        return f"{self.root}/difficulty/functions/{function}.parquet"

    def difficulty_test(self, function: str = "{function}") -> str:
        """One difficulty function on the test pairs (the report's figures by difficulty)."""
        return f"{self.root}/difficulty/test/{function}.parquet"

    def curriculum(self, scoring: str = "{scoring}") -> str:
        """The folder of one curriculum's shards."""
        return f"{self.root}/curricula/{scoring}"

    def experiment(self, experiment: str = "{experiment}", seed: int | str = "{seed}") -> str:
        """The folder of one (training run or experiment, seed)."""
        return f"{self.root}/experiments/{experiment}/seed={seed}"

    def train(self, experiment: str = "{experiment}", seed: int | str = "{seed}") -> dict[str, str]:
        """A trained ranker: its model folder, dev curve and resolved config."""
        out = self.experiment(experiment, seed)
        return {"model": f"{out}/model", "dev_curve": f"{out}/dev_curve.parquet", "config": f"{out}/config.json"}

    def selection(self, experiment: str = "{experiment}", seed: int | str = "{seed}") -> str:
        """A tuned experiment's dev selection table."""
        return f"{self.experiment(experiment, seed)}/selection.parquet"

    @staticmethod
    def additive(folder: str) -> dict[str, str]:
        """The score-additivity outputs in ``folder``: the interpolated run, its metrics and the interpolation grid."""
        return {"additive_run": f"{folder}/test+bm25.run", "additive_metrics": f"{folder}/metrics+bm25.parquet",
                "additivity": f"{folder}/additivity.parquet"}

    def evaluate(self, experiment: str = "{experiment}", seed: int | str = "{seed}",
                 additive: bool = False) -> dict[str, str]:
        """An experiment's test run and per-query metrics, with the score-additivity outputs when ``additive``."""
        out = self.experiment(experiment, seed)
        return {"run": f"{out}/test.run", "metrics": f"{out}/metrics.parquet",
                **(self.additive(out) if additive else {})}

    def reference(self, reference: str = "{reference}", additive: bool = False) -> dict[str, str]:
        """A reference ranker's test run and metrics, with the score-additivity outputs when ``additive``."""
        out = f"{self.root}/references/{reference}"
        return {"run": f"{out}/test.run", "metrics": f"{out}/metrics.parquet",
                **(self.additive(out) if additive else {})}

    def active(self, method: str = "{method}", seed: int | str = "{seed}") -> dict[str, str]:
        """One active-learning (method, seed): its learning curve and per-query test metrics."""
        out = f"{self.root}/active/{method}/seed={seed}"
        return {"curve": f"{out}/curve.parquet", "test_metrics": f"{out}/test_metrics.parquet"}

    @property
    def report_dir(self) -> str:
        """The dataset's report folder."""
        return f"{self.root}/report"

    def report(self) -> dict[str, str]:
        """The result tables (seeds, metrics, power; :func:`table_files`) and the figures folder."""
        out = self.report_dir
        return {**table_files("seeds", f"{out}/table_seeds"), **table_files("metrics", f"{out}/table_metrics"),
                **table_files("power", f"{out}/table_power"), "figures": f"{out}/figures"}

    def tuning_report(self) -> dict[str, str]:
        """The table of the knobs tuned on dev."""
        return table_files("tuning", f"{self.report_dir}/table_tuning")

    def active_report(self) -> dict[str, str]:
        """Active learning's label-fraction table, learning curves and figure."""
        out = self.report_dir
        return {**table_files("table", f"{out}/table_active"), **table_files("curves", f"{out}/curves_active"),
                "figure": f"{out}/figures_active/learning_curves.png"}

    # ------------------------------------------------------------------------------------------- a study
    @property
    def study_name(self) -> str:
        """The folder of a study's own outputs relative to ``<results>/report``, ``logs`` and ``benchmarks``:
        ``study``, or ``study/only=<k1>+<k2>`` for a selection (a smaller family of cells, judged on its own)."""
        return f"{STUDY}/{SELECTION}{'+'.join(self.only)}" if self.only else STUDY

    @property
    def study_dir(self) -> str:
        """``<results>/report/<study name>``."""
        return f"{self.results}/report/{self.study_name}"

    @property
    def study_rounds(self) -> str:
        """The folder of a sequential study's round records."""
        return f"{self.study_dir}/rounds"

    def study_round(self, round_: int | str = "{round}") -> str:
        """One round's record."""
        return f"{self.study_rounds}/{round_file(round_)}"

    def study_report(self) -> dict[str, str]:
        """The findings page, its table (CSV and Parquet), its forest plot and the cost per dataset."""
        out = self.study_dir
        return {"findings": f"{out}/findings.md", "table": f"{out}/findings.csv", "parquet": f"{out}/findings.parquet",
                "figure": f"{out}/findings.png", "costs": f"{out}/costs.csv"}

    @property
    def study_ledger(self) -> str:
        """The study's ledger (curricula/study/ledger.py): ``<ledger>/<study name>``, inside the repository, so a
        study's finished runs are committed with it and outlive the machine that trained them."""
        return f"{self.ledger}/{self.study_name}"

    def study_entry(self, dataset: str = "{dataset}", arm: str = "{arm}", seed: int | str = "{seed}") -> str:
        """A finished run's ledger entry as its rule wrote it, beside the results (the ledger holds the same bytes
        under the run's id)."""
        return f"{self.study_dir}/entries/{dataset}/{arm}/seed={seed}.parquet"

    # ---------------------------------------------------------------------------------- logs and benchmarks
    def side(self, kind: str, name: str | None = None) -> str:
        """The ``kind`` (``logs`` or ``benchmarks``) folder of the dataset (or of ``name``, e.g. the study's name):
        ``<kind>/<name>`` for the default results folder, ``<kind>/<results, its path parts joined by _>/<name>``
        for any other, so two configs of one dataset writing to different results folders in one working directory
        never share a log or benchmark file."""
        if kind not in SIDE_KINDS:
            raise ValueError(f"unknown side folder {kind!r}; expected one of {', '.join(SIDE_KINDS)}")
        stem = name or self.dataset
        if Path(self.results) == Path(DEFAULT_RESULTS):
            return f"{kind}/{stem}"
        tag = "_".join(p for p in Path(self.results).parts if p not in ("/", ".", ".."))
        return f"{kind}/{tag}/{stem}"

    @property
    def logs(self) -> str:
        return self.side("logs")

    @property
    def benchmarks(self) -> str:
        return self.side("benchmarks")

    def log(self, stem: str) -> str:
        """A dataset rule's log (``stem``: the rule's name and wildcards, e.g. ``curriculum/{scoring}``)."""
        return f"{self.logs}/{stem}.log"

    def benchmark(self, stem: str) -> str:
        """A dataset rule's benchmark table, under the same ``stem`` as its log."""
        return f"{self.benchmarks}/{stem}.tsv"

    def study_log(self, stem: str) -> str:
        """A study rule's log, in the study's (or selection's) own logs folder."""
        return f"{self.side('logs', self.study_name)}/{stem}.log"

    def study_benchmark(self, stem: str) -> str:
        """A study rule's benchmark table."""
        return f"{self.side('benchmarks', self.study_name)}/{stem}.tsv"

    # ------------------------------------------------------------------------------------ globs (read the tree)
    def experiment_files(self, filename: str = "metrics.parquet",
                         experiment: str = "*") -> dict[tuple[str, str], Path]:
        """{(experiment, seed): path} of every existing ``experiments/<experiment>/seed=<s>/<filename>`` (``*``: every
        experiment), in path order."""
        pattern = f"{self.experiment(experiment, '*')}/{filename}".removeprefix(f"{self.root}/")
        return {(p.parent.parent.name, p.parent.name.removeprefix("seed=")): p
                for p in sorted(Path(self.root).glob(pattern))}


def round_records(folder: str | Path) -> list[Path]:
    """The round records (``round=<k>.json``) in ``folder``, in round order."""
    head, _, tail = round_file("*").partition("*")
    return sorted(Path(folder).glob(round_file("*")), key=lambda p: int(p.name.removeprefix(head).removesuffix(tail)))


def selection_rounds(study_dir: str | Path) -> list[str]:
    """The round-record folders of the ``study.only`` selections under a whole study's folder, sorted."""
    first = Path(Layout(only=("*",)).study_round(1)).relative_to(Layout().study_dir)
    return sorted(str(p.parent) for p in Path(study_dir).glob(str(first)))
