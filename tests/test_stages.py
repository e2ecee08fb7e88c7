"""The stage layer (curricula/stages/): every workflow script is one call to its rule's entry point in the stages,
inside the job's log and GPU contexts, and every rule file with scripts has its module of entry points there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.workflow_run import REPO

SCRIPTS = REPO / "workflow_scripts"
STAGES = REPO / "curricula" / "stages"
#: the job helpers a script may use beside the stages: the log file and the job's GPU plan
HELPERS = {("curricula.plumbing.logs", "logged"), ("curricula.plumbing.gpus", "planned_job")}
#: a rule's ``script:`` directive and the workflow script it names
SCRIPT_RULE = re.compile(r'^\s*script:\s*\n\s*"\.\./workflow_scripts/(\w+)\.py"', re.M)


def stage_calls(tree: ast.Module) -> tuple[dict[str, str], list[str]]:
    """The names a script imports from ``curricula.stages.<module>`` ({name: module}) and every other import it
    makes, anywhere in the file, as ``line: what`` (the two job helpers excepted)."""
    stages, others = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            others += [f"{node.lineno}: import {alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if module.startswith("curricula.stages."):
                    stages[alias.asname or alias.name] = module.removeprefix("curricula.stages.")
                elif (module, alias.name) not in HELPERS:
                    others.append(f"{node.lineno}: from {module} import {alias.name}")
    return stages, others


def script_problems(path: Path) -> list[str]:
    """What keeps a workflow script from being ``with logged(...)[, planned_job(...)]: <one stage call>``: an import
    of anything but an entry point of curricula.stages and the two job helpers, a statement beside the ``with``, or
    a ``with`` body other than one call of an imported entry point."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    stages, problems = stage_calls(tree)
    problems = [f"{path.name}:{line}" for line in problems]
    jobs = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))]
    if len(jobs) != 1 or not isinstance(jobs[0], ast.With):
        return problems + [f"{path.name}: {len(jobs)} statement(s) beside the imports, not one `with`"]
    helpers = {name for _, name in HELPERS}
    contexts = [item.context_expr for item in jobs[0].items]
    if not all(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in helpers for c in contexts):
        problems.append(f"{path.name}:{jobs[0].lineno}: a `with` of other contexts than {sorted(helpers)}")
    body = jobs[0].body
    call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in stages):
        problems.append(f"{path.name}:{jobs[0].lineno}: the job is not one call of an entry point of curricula.stages")
    return problems


def rule_scripts() -> dict[str, set[str]]:
    """{rule file stem: the workflow scripts its rules run} for every rules/*.smk with script rules."""
    found = {smk.stem: set(SCRIPT_RULE.findall(smk.read_text(encoding="utf-8")))
             for smk in sorted((REPO / "rules").glob("*.smk"))}
    return {stem: scripts for stem, scripts in found.items() if scripts}


def test_every_workflow_script_is_one_call_of_a_stage():
    scripts = sorted(SCRIPTS.glob("*.py"))
    assert len(scripts) >= 20
    problems = [problem for path in scripts for problem in script_problems(path)]
    assert not problems, "workflow scripts that reach past curricula.stages:\n" + "\n".join(problems)


def test_the_script_check_sees_a_script_that_calls_the_library(tmp_path):
    """The check itself: a script importing a library helper, or doing more than one stage call, is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from curricula.plumbing.logs import logged\n"
                   "from curricula.plumbing.shards import parse_scatteritem\n"
                   "from curricula.stages.bm25 import bm25_run_shard\n\n"
                   "with logged(snakemake.log[0]):\n"
                   "    shard = parse_scatteritem(snakemake.wildcards.scatteritem)\n"
                   "    bm25_run_shard(snakemake.input, snakemake.output, bm25={}, scatteritem=shard)\n")
    assert script_problems(bad) == ["bad.py:2: from curricula.plumbing.shards import parse_scatteritem",
                                    "bad.py:5: the job is not one call of an entry point of curricula.stages"]
    good = tmp_path / "good.py"
    good.write_text("from curricula.plumbing.gpus import planned_job\nfrom curricula.plumbing.logs import logged\n"
                    "from curricula.stages.teacher import teacher_train\n\n"
                    "with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):\n"
                    "    teacher_train(snakemake.input, snakemake.output, teacher={}, seed=1)\n")
    assert script_problems(good) == []


def test_every_rule_file_with_scripts_has_its_stage_module():
    """rules/<name>.smk's scripts call the entry points in curricula/stages/<name>.py, or the generic gather that
    several rule files share in curricula/stages/common.py; no stage module lacks its rule file."""
    files = rule_scripts()
    assert {"data", "bm25", "dense", "train"} <= set(files)  # the pattern finds the script rules
    missing = [f"rules/{stem}.smk: no curricula/stages/{stem}.py" for stem in files
               if not (STAGES / f"{stem}.py").is_file()]
    assert not missing, "\n".join(missing)
    runs: dict[str, set[str]] = {}
    for stem, scripts in files.items():
        for script in scripts:
            runs.setdefault(script, set()).add(stem)
    elsewhere = []
    for script, stems in sorted(runs.items()):
        stages, _ = stage_calls(ast.parse((SCRIPTS / f"{script}.py").read_text(encoding="utf-8")))
        elsewhere += [f"workflow_scripts/{script}.py: its entry point is in stages/{module}.py, not stages/"
                      f"{' or '.join(sorted(stems | {'common'}))}.py" for module in set(stages.values())
                      if module not in stems | {"common"}]
    assert not elsewhere, "\n".join(elsewhere)
    strays = [path.name for path in STAGES.glob("*.py") if path.stem not in {*files, "__init__", "common"}]
    assert not strays, f"stage modules without a rules/*.smk of their name: {strays}"
