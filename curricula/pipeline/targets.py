"""The inputs of one dataset's rules and its final targets, from its :class:`~curricula.pipeline.plan.DatasetPlan`
and the paths of its :class:`~curricula.plumbing.layout.Layout` (the rule files' input functions call these)."""

from __future__ import annotations

from curricula.data.ingest import INGEST_TABLES
from curricula.difficulty import needed_inputs
from curricula.experiments.specs import needed_tables
from curricula.pipeline.plan import DatasetPlan
from curricula.plumbing.keys import CURVE, DIFFICULTY, METRICS, MODEL, REFERENCE, SELECTION
from curricula.plumbing.keys import NameKey, SeedKey, with_bm25


def dataset_files(plan: DatasetPlan) -> list[str]:
    """Every input file named in dataset.files (nested split maps flattened), so a changed file re-runs ingest."""
    out: list[str] = []
    for value in plan.config["dataset"].get("files", {}).values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return sorted(out)


def ingest_outputs(plan: DatasetPlan) -> dict[str, str]:
    """{table: path} of the ingest tables."""
    return {name: plan.layout.data(name) for name in INGEST_TABLES}


def biencoder_input(plan: DatasetPlan) -> dict[str, str]:
    """The fine-tuned bi-encoder folder when G is fine-tuned, else nothing (the pre-trained model)."""
    return {"biencoder": plan.layout.dense()["biencoder"]} if plan.finetune_g else {}


def difficulty_function_inputs(plan: DatasetPlan, function: str) -> dict[str, str]:
    """Ingest tables plus only what this scoring function reads (the teacher only for bert_*)."""
    bm25, dense = plan.layout.bm25(), plan.layout.dense()
    paths = {"candidate_scores": bm25["candidate_scores"], "run": bm25["run"],
             "teacher": plan.layout.teacher()["scores"], "query_vectors": dense["queries"],
             "doc_vectors": dense["docs"]}
    need = needed_inputs([function], plan.config["difficulty"]["bm25_list"])
    return {**ingest_outputs(plan), **{name: paths[name] for name in sorted(need)}}


def train_inputs(plan: DatasetPlan, run: str) -> dict[str, str]:
    """Ingest tables, the run's curriculum shards, and only the extra tables its axes read."""
    spec = plan.runs[run]
    arm, dense = spec.arm, plan.layout.dense()
    extra = {"neighbors": dense["neighbors"], "run": plan.layout.bm25()["run"], "query_vectors": dense["queries"],
             "doc_vectors": dense["docs"]}
    if arm.weighting is not None:
        extra["weights"] = plan.layout.difficulty_function(arm.weighting.scoring)
    return {**ingest_outputs(plan), "curriculum": plan.layout.curriculum(arm.scoring),
            **{name: extra[name] for name in sorted(needed_tables(spec))}}


def tuned_inputs(plan: DatasetPlan, experiment: str, seed: int | str) -> dict[str, str]:
    """The dev curves and models of a tuned experiment's runs for one seed, keyed ``curve|<run>`` / ``model|<run>``."""
    out = {}
    for run in plan.tuned[experiment]:
        paths = plan.layout.train(run, seed)
        out[NameKey(CURVE, run).encode()], out[NameKey(MODEL, run).encode()] = paths["dev_curve"], paths["model"]
    return out


def evaluate_outputs(plan: DatasetPlan, experiment: str = "{experiment}", seed: int | str = "{seed}"
                     ) -> dict[str, str]:
    """An experiment's test run and metrics, with the score-additivity outputs when enabled."""
    return plan.layout.evaluate(experiment, seed, plan.additive)


def reference_outputs(plan: DatasetPlan, reference: str = "{reference}", additive: bool | None = None
                      ) -> dict[str, str]:
    """A reference ranker's test run and metrics, plus its score-additivity outputs (when enabled) unless it is a
    BM25 (BM25 interpolated with BM25 is no new ranker); ``additive`` says which for the rules' wildcard patterns."""
    if additive is None:
        additive = not reference.startswith("bm25")
    return plan.layout.reference(reference, additive and plan.additive)


def additive_input(plan: DatasetPlan) -> dict[str, str]:
    """BM25's candidate scores, which score additivity interpolates with (when enabled)."""
    return {"bm25": plan.layout.bm25()["candidate_scores"]} if plan.additive else {}


def reference_scores(plan: DatasetPlan, reference: str) -> dict[str, str]:
    """The ingest tables and the candidate scores of a reference ranker."""
    scores = {"bm25": plan.layout.bm25()["candidate_scores"], "bm25_tuned": plan.layout.bm25()["tuned_scores"],
              "teacher": plan.layout.teacher()["scores"]}
    return {**ingest_outputs(plan), "scores": scores[reference]}


def active_inputs(plan: DatasetPlan, method: str) -> dict[str, str]:
    """The ingest tables, plus the dense query vectors for Core-Set."""
    inputs = ingest_outputs(plan)
    if method == "coreset":
        inputs["query_vectors"] = plan.layout.dense()["queries"]
    return inputs


# ------------------------------------------------------------------------------ the report's and rule all's inputs
def runs_by_key(plan: DatasetPlan, kind: str, additive: bool = False) -> dict[str, str]:
    """{"<kind>|<experiment>|<seed>": path} of every (experiment, seed)'s dev curve (``kind`` ``curve``) or test
    metrics, as a flat input dict; with ``additive`` also each experiment's metrics with score additivity, as
    ``<experiment>+bm25``."""
    paths = {}
    for name in plan.experiments:
        for seed in plan.seeds:
            if kind == CURVE:
                paths[SeedKey(CURVE, name, str(seed)).encode()] = plan.layout.train(name, seed)["dev_curve"]
                continue
            out = evaluate_outputs(plan, name, seed)
            paths[SeedKey(METRICS, name, str(seed)).encode()] = out["metrics"]
            if additive and plan.additive:
                paths[SeedKey(METRICS, with_bm25(name), str(seed)).encode()] = out["additive_metrics"]
    return paths


def reference_metrics(plan: DatasetPlan) -> dict[str, str]:
    """{"reference|<name>": path} of every reference ranker's test metrics, with ``<name>+bm25`` under additivity."""
    out = {}
    for ref in plan.config["evaluate"]["references"]:
        paths = reference_outputs(plan, ref)
        out[NameKey(REFERENCE, ref).encode()] = paths["metrics"]
        if "additive_metrics" in paths:
            out[NameKey(REFERENCE, with_bm25(ref)).encode()] = paths["additive_metrics"]
    return out


def selections(plan: DatasetPlan) -> dict[str, str]:
    """{"selection|<experiment>|<seed>": path} of every tuned experiment's dev selection."""
    return {SeedKey(SELECTION, name, str(seed)).encode(): plan.layout.selection(name, seed)
            for name in plan.tuned for seed in plan.seeds}


def difficulty_tests(plan: DatasetPlan) -> dict[str, str]:
    """{"difficulty|<function>": path} of the test-pair difficulty tables the report's figures read."""
    return {NameKey(DIFFICULTY, f).encode(): plan.layout.difficulty_test(f) for f in plan.report_functions()}


def tuning_report_outputs(plan: DatasetPlan) -> dict[str, str]:
    """The tuning table's files, when an experiment tunes a knob."""
    return plan.layout.tuning_report() if plan.tuned else {}


def active_curves(plan: DatasetPlan) -> dict[str, str]:
    """{"curve|<method>|<seed>": path} of every (method, seed)'s learning curve, as a flat input dict."""
    methods, seeds = plan.config["active"]["methods"], plan.config["active"]["seeds"]
    return {SeedKey(CURVE, m, s).encode(): plan.layout.active(m, s)["curve"] for m in methods for s in seeds}


def all_trained(plan: DatasetPlan) -> list[str]:
    """Every (experiment, seed)'s model and dev curve, and every tuned experiment's selection."""
    return [path for name in plan.experiments for seed in plan.seeds
            for path in (plan.layout.train(name, seed)["model"], plan.layout.train(name, seed)["dev_curve"])
            ] + list(selections(plan).values())


def all_evaluated(plan: DatasetPlan) -> list[str]:
    """Every (experiment, seed)'s and every reference ranker's test metrics."""
    runs = [evaluate_outputs(plan, name, seed)["metrics"] for name in plan.experiments for seed in plan.seeds]
    return runs + [reference_outputs(plan, ref)["metrics"] for ref in plan.config["evaluate"]["references"]]


def all_active(plan: DatasetPlan) -> list[str]:
    """Every learning curve and the active-learning report, when active learning is enabled."""
    if plan.active is None:
        return []
    return [*active_curves(plan).values(), *plan.layout.active_report().values()]


def dense_consumers(plan: DatasetPlan) -> list[str]:
    """What reads G's vectors or neighbours: ``difficulty <function>`` (of the grid's orders and weights, the joined
    table's and the report's figures) and ``train <run>``. Empty: the run plans no dense job."""
    dense = plan.layout.dense()
    tables = {dense["queries"], dense["docs"], dense["neighbors"]}
    functions = {*plan.consumed_functions(), *plan.difficulty_functions(), *plan.report_functions()}
    readers = [f"difficulty {f}" for f in sorted(functions)
               if tables & set(difficulty_function_inputs(plan, f).values())]
    readers += [f"train {run}" for run in plan.runs if tables & set(train_inputs(plan, run).values())]
    return readers


def all_outputs(plan: DatasetPlan) -> list[str]:
    """The final targets of `rule all`; G's neighbours and where G ranks the true replies only when something
    reads G (:func:`dense_consumers`), the joined difficulty table only when it holds a function."""
    layout = plan.layout
    bm25, dense = layout.bm25(), layout.dense()
    return [
        *ingest_outputs(plan).values(), bm25["run"], bm25["trec"], bm25["candidate_scores"],
        *((dense["neighbors"], dense["positive_ranks"]) if dense_consumers(plan) else ()),
        layout.teacher()["scores"], *((layout.difficulty_table,) if plan.difficulty_functions() else ()),
        *all_trained(plan), *all_evaluated(plan),
        *layout.report().values(), *tuning_report_outputs(plan).values(), *all_active(plan),
    ]
