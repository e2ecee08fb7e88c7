"""A digest of what a dry run plans: for each rule, how many jobs and a SHA-256 over every job's outputs, inputs and
params as Snakemake compares them (``repr`` of each param, so key order counts too).

``tests/data/plan_snapshot.json`` holds these digests for the default config and every preset of ``configs/``
(:data:`CONFIGS`), taken on the code before the typed spec replaced the spec mappings;
``tests/test_spec.py`` recomputes them. Regenerate (only after a deliberate change of what the plans hold) with
``PYTHONPATH=. .venv/bin/python tests/plan_snapshot.py tests/data/plan_snapshot.json``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

#: the configurations whose plans are kept: name -> config files over config.yaml (every preset of configs/ whose
#: data is at hand here, the study's overlays over configs/study.yaml as their headers say)
CONFIGS: dict[str, list[str]] = {
    "default": [],
    **{name: [f"configs/{name}.yaml"] for name in (
        "active_wikiqa", "chitchat_full", "cross_encoder", "dailydialog_pp", "fast_grid", "hcl_ablation",
        "hcl_ablation_g", "macavaney_bm25", "patience", "selection_noise", "selection_noise_cross_encoder",
        "selection_noise_cross_encoder_dailydialog_pp", "semeval_cqa", "wikiqa")},
    "study": ["configs/study.yaml"],
    **{f"study_{name}": ["configs/study.yaml", f"configs/study_{name}.yaml"]
       for name in ("rounds", "curricula", "cross_encoder")},
}
#: the presets that read only the packaged default dataset (the others need ../shared/data)
PACKAGED = ("default", "chitchat_full", "cross_encoder", "fast_grid", "hcl_ablation", "hcl_ablation_g",
            "macavaney_bm25", "patience", "selection_noise", "selection_noise_cross_encoder")


def job_lines(repo: Path, configfiles: Sequence[str]) -> dict[str, list[str]]:
    """{rule: one line per job (outputs, inputs, sorted param reprs)} of a forced dry run's DAG."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        wf = api.workflow(resource_settings=ResourceSettings(cores=1),
                          config_settings=ConfigSettings(configfiles=[repo / c for c in configfiles]),
                          snakefile=repo / "Snakefile", workdir=repo)
        workflow = wf.dag(DAGSettings(forceall=True)).workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        lines: dict[str, list[str]] = defaultdict(list)
        for job in workflow.dag.jobs:
            params = sorted(repr(value) for value in job.params)
            lines[job.rule.name].append(json.dumps([sorted(map(str, job.output)), sorted(map(str, job.input)),
                                                    params]))
    return lines


def plan_digest(repo: Path, configfiles: Sequence[str]) -> dict[str, list]:
    """{rule: [jobs, digest]} of one configuration's dry run."""
    return {rule: [len(rows), hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()[:16]]
            for rule, rows in sorted(job_lines(repo, configfiles).items())}


if __name__ == "__main__":
    repo = Path.cwd()
    snapshot = {name: plan_digest(repo, files) for name, files in CONFIGS.items()}
    Path(sys.argv[1]).write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    print({name: sum(n for n, _ in rules.values()) for name, rules in snapshot.items()})
