"""Small command-line helpers around the pipeline: ``python -m curricula.cli outputs config.yaml``.

Arguments after ``--`` are Snakemake's own (``make run`` passes its ``ARGS``): their ``--configfile`` files overlay
the config files named before, as they did for Snakemake, so ``make run ARGS="--configfile configs/wikiqa.yaml"``
prints WikiQA's outputs, not the default dataset's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from curricula.evaluation.comparisons import experiment_files, load_metrics
from curricula.evaluation.metrics import split_metrics
from curricula.plumbing.config import load_config
from curricula.plumbing.contracts import CANDIDATE_SCORES, QRELS, QUERIES, TEACHER_SCORES, read_table
from curricula.plumbing.layout import Layout, round_records, selection_rounds
from curricula.report.tables import converged_length, planner_markdown
from curricula.study.grid import selected_datasets

EXAMPLE = Layout(dataset="chitchat").root  # a dataset's results folder, in the commands' help


def outputs(config_files: list[str], overrides: dict | None = None) -> int:
    """Print where the configured run's outputs are, stage by stage, and which exist (for a study: each dataset's
    folder and report, then the round records and the findings page). ``overrides`` are Snakemake's ``--config``
    values, parsed (:func:`config_overrides_in`)."""
    return run_summary(load_config(*config_files, overrides=overrides))


def run_summary(config: dict) -> int:
    """:func:`outputs` of a validated config (the Snakefile prints it when a run succeeds)."""
    if config.get("study"):
        return study_outputs(config)
    layout = Layout.of(config)
    root = Path(layout.root)
    print(f"Outputs of dataset '{config['dataset']['name']}' are under {root}/")
    queries = Path(layout.data("queries"))
    if queries.is_file():
        counts = dict(pl.read_parquet(queries, columns=["split"])["split"].value_counts().iter_rows())
        print("  queries per split (as ingested, after dataset.keep_queries): "
              + ", ".join(f"{split} {counts.get(split, 0):,}" for split in ("train", "dev", "test")))
    for stage in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        files = sorted(f for f in stage.rglob("*") if f.is_file())
        print(f"  {stage.name}/: {len(files)} file(s), e.g. {files[0].relative_to(root) if files else '-'}")
    curves = list(layout.experiment_files("dev_curve.parquet").values())
    if curves:
        print("Best dev value per trained ranker (model selection on dev; test is evaluated later), the step whose "
              "weights were kept, and why training stopped:")
        for path in curves:
            curve = pl.read_parquet(path)
            best = curve.sort(["value", "step"], descending=[True, False]).row(0, named=True)
            stopped = curve["stopped"][-1] if "stopped" in curve.columns else None
            # !s prints the int step as before (polars types max() as any literal, bytes among them)
            print(f"  {path.parent.parent.name:>36} {path.parent.name:<8} {best['metric']} {best['value']:.4f} "
                  f"at step {best['step']}, stopped at {curve['step'].max()!s} by {stopped or 'budget'}")
    table = Path(layout.report()["seeds_md"])
    if table.is_file():
        print(f"\nResult table: {table}  (all measures: {Path(layout.report()['metrics_md'])}; "
              "HTML report: snakemake --report report.html)\n")
        print(table.read_text(encoding="utf-8"))
    print(f"Logs: {layout.logs}/  Benchmarks: {layout.benchmarks}/")
    return 0


def study_outputs(config: dict) -> int:
    """Print a study's dataset folders, each dataset's result table, and its findings page when it exists."""
    study = config["study"]
    own = Layout.of(config)
    datasets = selected_datasets(list(study["datasets"]), study["only"])
    print(f"Study over {len(datasets)} datasets; each dataset's outputs are under {Path(own.results)}/<dataset>/:")
    for name in datasets:
        layout = Layout(own.results, name)
        table = Path(layout.report()["metrics_md"])
        print(f"  {name}: {Path(layout.root)}/  (result table: {table if table.is_file() else 'not yet written'}; "
              f"{layout.logs}/, {layout.benchmarks}/)")
    rounds = Path(own.study_rounds)
    if round_records(rounds):
        print(f"\nRound records: {rounds}/  (as tables: python -m curricula.cli rounds {rounds})")
    page = {name: Path(path) for name, path in own.study_report().items()}
    findings = page["findings"]
    if findings.is_file():
        print(f"\nFindings: {findings}  (table: {page['table']}, figure: {page['figure']}, cost per dataset: "
              f"{page['costs']}; HTML report: snakemake --report report.html --configfile ...)\n")
        print(findings.read_text(encoding="utf-8"))
    return 0


def references(config_files: list[str], split: str) -> int:
    """Print the metrics of the reference rankers of the candidates: BM25 (Lucene scores) and the teacher."""
    config = load_config(*config_files)
    layout = Layout.of(config)
    queries = read_table(layout.data("queries"), QUERIES)
    qrels = read_table(layout.data("qrels"), QRELS)
    rel = config["dataset"]["relevant_min"]
    sources = {"bm25": (layout.bm25()["candidate_scores"], CANDIDATE_SCORES),
               "teacher": (layout.teacher()["scores"], TEACHER_SCORES)}
    rows = []
    for name, (path, spec) in sources.items():
        if Path(path).exists():
            rows.append({"ranker": name, **split_metrics(read_table(path, spec), queries, qrels, split,
                                                         relevant_min=rel)})
    with pl.Config(float_precision=4, tbl_hide_dataframe_shape=True):
        print(f"{split} split of '{config['dataset']['name']}', candidates re-ranked:")
        print(pl.DataFrame(rows))
    return 0


def plan(roots: list[str], measure: str, max_queries: int | None) -> int:
    """Print the power planner (:func:`curricula.report.tables.planner_markdown`) of each finished dataset results
    folder: how many seeds and test queries a 2% effect needs, and what each number of seeds detects with its test
    split."""
    for root in roots:
        metrics = load_metrics(experiment_files(root))
        print(f"## {root}\n")
        print("\n".join(planner_markdown(metrics, measure, max_queries=max_queries)) + "\n")
    return 0


def length(roots: list[str], experiment: str) -> int:
    """Print, per dataset results folder, the converged length of ``experiment`` (default baseline) on dev
    (:func:`curricula.report.tables.converged_length`): the value for that dataset's ``train.steps``."""
    for root in roots:
        paths = experiment_files(root, "dev_curve.parquet", experiment)
        median, best = converged_length({seed: pl.read_parquet(p) for (_, seed), p in paths.items()})
        steps = ", ".join(f"seed {s}: {b}" for s, b in best.items())
        print(f"{root}: {experiment} kept its dev-best model at steps {steps}; median {median} (train.steps)")
    return 0


def pair_lengths(roots: list[str], split: str, budgets: list[int], model: str) -> int:
    """Print, per dataset results folder, the length in word pieces of every (query, candidate) pair of ``split`` as
    the cross-encoder sees it before truncation (its quantiles), and the share of pairs each ``max_length`` in
    ``budgets`` keeps whole: where a dataset's ``train.max_length`` can be set from its data."""
    import numpy as np

    from curricula.models.cross_encoder import full_pair_lengths, length_coverage
    from curricula.models.hf import load_tokenizer, resolve_model_dir
    from curricula.plumbing.contracts import CANDIDATES, DOCS

    tokenizer = load_tokenizer(resolve_model_dir(model))
    for root in roots:
        layout = Layout.at(root)
        queries = read_table(layout.data("queries"), QUERIES, ["qid", "split", "text"]).filter(
            pl.col("split") == split)
        pairs = (read_table(layout.data("candidates"), CANDIDATES).join(queries, on="qid")
                 .join(read_table(layout.data("docs"), DOCS).rename({"text": "doc"}), on="docid"))
        if pairs.is_empty():
            print(f"error: {Path(layout.data('candidates')).parent}: no candidate pairs of {split} queries",
                  file=sys.stderr)
            return 1
        lengths = full_pair_lengths(tokenizer, pairs["text"].to_list(), pairs["doc"].to_list())
        q = np.percentile(lengths, [50, 90, 95, 99])
        kept = ", ".join(f"{b}: {100 * share:.1f}%" for b, share in length_coverage(lengths, budgets).items())
        print(f"{root}: {len(lengths)} {split} pairs, word pieces median {q[0]:.0f}, 90% {q[1]:.0f}, 95% {q[2]:.0f}, "
              f"99% {q[3]:.0f}, max {lengths.max()}; kept whole at max_length {kept}")
    return 0


def rounds(folder: str) -> int:
    """Print a study's round records (``results/report/study/rounds/round=<k>.json``; a ``study.only`` selection's
    are under ``results/report/study/only=<keys>/rounds``) as tables, in round order."""
    from curricula.study.rounds import read_round, round_chain, rounds_markdown

    paths = round_records(folder)
    if not paths:
        # a study.only selection keeps its rounds in its own folder (curricula.plumbing.layout.Layout.study_name)
        selections = selection_rounds(Path(folder).parent)
        hint = f"; the study.only selections' rounds are in {', '.join(selections)}" if selections else ""
        print(f"error: no round records (round=<k>.json) in {folder}{hint}", file=sys.stderr)
        return 1
    records = [read_round(p) for p in paths]
    kept, broken = round_chain(records)
    if not kept:
        print(f"error: {paths[0]}: {broken}", file=sys.stderr)
        return 1
    print("\n".join(rounds_markdown(kept)))
    if broken:
        left = ", ".join(p.name for p in paths[len(kept):])
        print(f"note: {left} in {folder} left by another run of the study, not shown: {broken}", file=sys.stderr)
    return 0


def ledger(args: argparse.Namespace, snakemake_args: list[str]) -> int:
    """``ledger merge|findings|docs|show``: merge ledgers, recompute a study's rounds and findings from its ledger,
    regenerate the docs pages' ledger tables, or list what a ledger holds."""
    from curricula.study.ledger import Ledger
    from curricula.study.merge import merge_ledgers

    if args.action == "merge":
        report = merge_ledgers(args.sources, args.into)
        print(f"{args.into}: {report.added} run(s) added, {report.held} already held, from {report.sources} "
              f"ledger(s)")
        return 0
    from curricula.pipeline.study import study_plan_of

    plan = study_plan_of(args.config + configfiles_in(snakemake_args), config_overrides_in(snakemake_args))
    if args.action == "show":
        held = Ledger(plan.layout.study_ledger).records()
        print(f"{plan.layout.study_ledger}: {len(held)} run(s)")
        counts: dict[tuple[str, str], int] = {}
        for record in held:
            counts[(record["dataset"], record["arm"])] = counts.get((record["dataset"], record["arm"]), 0) + 1
        for (dataset, arm), n in sorted(counts.items()):
            print(f"  {dataset:>16} {arm:<32} {n} run(s)")
        return 0
    from curricula.study.recompute import recompute

    out = Path(args.out or plan.layout.study_dir + "-from-ledger")
    done = recompute(plan, out)
    print(f"{out}: {len(done.rounds)} round record(s)" + (", the findings page" if done.findings else ""))
    if done.stopped:
        print(f"stopped: {done.stopped}", file=sys.stderr)
    return 0


def option_values(snakemake_args: list[str], names: tuple[str, ...]) -> list[str]:
    """The values given to a Snakemake option that takes one or more (``--configfile a.yaml b.yaml``, up to the next
    option; ``--configfile=a.yaml`` too), under any of its ``names``, in order."""
    values: list[str] = []
    taking = False
    for arg in snakemake_args:
        name, eq, value = arg.partition("=")
        if name in names:
            taking = not eq
            if eq:
                values.append(value)
        elif arg.startswith("-"):
            taking = False
        elif taking:
            values.append(arg)
    return values


def configfiles_in(snakemake_args: list[str]) -> list[str]:
    """The files given to Snakemake's ``--configfile``/``--configfiles``, in order."""
    return option_values(snakemake_args, ("--configfile", "--configfiles"))


def config_overrides_in(snakemake_args: list[str]) -> dict:
    """The values given to Snakemake's ``--config``/``-C`` (``key=value`` each), parsed by Snakemake's own parser
    (``snakemake.cli.parse_config``: a value that is not a number or a boolean is read as YAML), later ones merged
    over earlier ones, as Snakemake overlays them on the config files."""
    from snakemake.cli import parse_config

    return parse_config(option_values(snakemake_args, ("--config", "-C")))


def ledger_parser(sub) -> None:
    """The ``ledger`` command's actions: merge, findings, show, docs."""
    p_ledger = sub.add_parser("ledger", help="a study's ledger of finished runs: merge, recompute, docs, show")
    ledger_sub = p_ledger.add_subparsers(dest="action", required=True)
    p_merge = ledger_sub.add_parser("merge", help="merge ledgers from other machines into one")
    p_merge.add_argument("sources", nargs="+", help="ledger folders to merge in, e.g. other/ledger/study")
    p_merge.add_argument("--into", required=True, help="the ledger folder to merge into, e.g. ledger/study")
    for action, text in (("findings", "recompute the round records and findings page from the ledger alone"),
                         ("show", "list the runs a study's ledger holds")):
        p_action = ledger_sub.add_parser(action, help=text)
        p_action.add_argument("config", nargs="*", help="the study's config files (or after --: Snakemake's "
                              "--configfile and --config)")
        if action == "findings":
            p_action.add_argument("--out", help="folder to write to (default: the study's folder + -from-ledger)")


def command_parser() -> argparse.ArgumentParser:
    """Every command's arguments (the ledger's in :func:`ledger_parser`)."""
    parser = argparse.ArgumentParser(prog="python -m curricula.cli", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_out = sub.add_parser("outputs", help="print where the outputs of a config are")
    p_out.add_argument("config", nargs="+", help="config file(s), later ones overlay earlier ones")
    p_ref = sub.add_parser("references", help="metrics of BM25 and the teacher on a split's candidates")
    p_ref.add_argument("config", nargs="+", help="config file(s), later ones overlay earlier ones")
    p_ref.add_argument("--split", default="dev", choices=["train", "dev", "test"])
    p_plan = sub.add_parser("plan", help="seeds and test queries a 2%% effect needs, from finished grids")
    p_plan.add_argument("results", nargs="+", help=f"a dataset's results folder, e.g. {EXAMPLE}")
    p_plan.add_argument("--measure", default="AP")
    p_plan.add_argument("--max-queries", type=int, default=None, help="largest test split to consider")
    p_len = sub.add_parser("length", help="the training length an experiment converges in on dev (train.steps)")
    p_len.add_argument("results", nargs="+", help=f"a dataset's results folder, e.g. {EXAMPLE}")
    p_len.add_argument("--experiment", default="baseline")
    p_pairs = sub.add_parser("pair-lengths", help="a cross-encoder's pair lengths in word pieces per dataset "
                             "(train.max_length)")
    p_pairs.add_argument("results", nargs="+", help=f"a dataset's results folder, e.g. {EXAMPLE}")
    p_pairs.add_argument("--split", default="train", choices=["train", "dev", "test"])
    p_pairs.add_argument("--lengths", default="64,128,256", help="max_length values to report, comma-separated")
    p_pairs.add_argument("--model", default="minilm", help="the tokenizer's model (train.model)")
    p_rounds = sub.add_parser("rounds", help="a study's seeds in rounds: each round's verdicts, seeds and thresholds")
    p_rounds.add_argument("folder", nargs="?", default=Layout().study_rounds,
                          help=f"the round records' folder (a study.only selection's: "
                          f"{Layout(only=('<keys>',)).study_rounds})")
    ledger_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    snakemake_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, snakemake_args = argv[:cut], argv[cut + 1:]
    parser = command_parser()
    args = parser.parse_args(argv)
    if args.command == "ledger":
        try:
            return ledger(args, snakemake_args)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    if args.command == "rounds":
        return rounds(args.folder)
    if args.command == "pair-lengths":
        return pair_lengths(args.results, args.split, [int(x) for x in args.lengths.split(",")], args.model)
    if args.command == "length":
        return length(args.results, args.experiment)
    if args.command == "plan":
        return plan(args.results, args.measure, args.max_queries)
    args.config += configfiles_in(snakemake_args)
    if args.command == "outputs":
        return outputs(args.config, config_overrides_in(snakemake_args))
    if args.command == "references":
        return references(args.config, args.split)
    return 2


if __name__ == "__main__":
    sys.exit(main())
