"""A study's ledger (curricula/study/ledger.py, entries.py, resume.py, merge.py, ledger_runs.py): entries written and
read back, append-only with refusals, merged from several machines, and the runs a study trains or reads from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curricula.plumbing.errors import InputFormatError
from curricula.plumbing.provenance import cpu_class
from curricula.study.entries import curve_summary, file_digest
from curricula.study.ledger import (
    Ledger,
    LedgerError,
    entry_path,
    manifest,
    manifest_differences,
    read_entry,
    read_record,
    write_entry,
)
from curricula.study.ledger_runs import claim_frames, gather, ledger_costs, upstream_variants, used_records
from curricula.study.merge import merge_ledgers
from curricula.study.resume import choose_seed, plan_runs, select_entries
from tests.ledger_fixtures import make_entry

SETTINGS = {"measure": "AP", "alpha": 0.05, "equivalence_margin": 0.02, "multiplicity": "holm",
            "sequential": {"kind": "obrien_fleming"}}
CLAIMS = [{"id": "c", "experiment": "x", "against": "baseline", "expect": "better"}]


def _values(seed: int, shift: float = 0.0, queries: int = 20) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, queries)
    return pl.DataFrame([{"experiment": name, "qid": f"q{i}", "measure": m, "value": float(v + shift)}
                         for name in ("x", "x+bm25") for m in ("AP", "RR") for i, v in enumerate(base)])


def test_an_entry_round_trips_with_float32_values_and_its_record_in_the_footer(tmp_path):
    entry = make_entry("d", "x", 3, _values(3), upstream={"data/queries.parquet": "a", "curricula/random": "b"})
    path = write_entry(entry_path(tmp_path, entry.record), entry)
    assert path.relative_to(tmp_path).as_posix() == f"runs/d/x/seed=3/{entry.record['run_id']}.parquet"
    back = read_entry(path)
    assert back.record == entry.record and back.key == ("d", "x", 3)
    assert back.values.schema["value"] == pl.Float32 and back.values.height == 80
    assert read_record(path) == entry.record
    # what determines the values is in the id; the cost and the host are not
    assert make_entry("d", "x", 3, _values(3), cpu_seconds=1.0).record["run_id"] == \
        make_entry("d", "x", 3, _values(3), cpu_seconds=2.0).record["run_id"]
    assert make_entry("d", "x", 3, _values(3), upstream={"t": "1"}).record["run_id"] != \
        make_entry("d", "x", 3, _values(3), upstream={"t": "2"}).record["run_id"]


def test_a_truncated_or_foreign_file_is_named(tmp_path):
    entry = make_entry("d", "x", 1, _values(1))
    path = write_entry(entry_path(tmp_path, entry.record), entry)
    path.write_bytes(path.read_bytes()[:-40])
    for read in (read_entry, read_record):
        with pytest.raises(InputFormatError, match="unreadable ledger entry") as err:
            read(path)
        assert str(err.value).startswith(str(path))
    other = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    with pytest.raises(InputFormatError, match="not a ledger entry"):
        read_entry(other)


def test_the_ledger_is_append_only_and_refuses_a_run_held_with_other_values(tmp_path):
    store = Ledger(tmp_path)
    entry = make_entry("d", "x", 1, _values(1))
    first = store.add(entry)
    assert store.add(make_entry("d", "x", 1, _values(1), cpu_seconds=99.0)) == first  # same values: kept as held
    assert read_entry(first).record["cpu_seconds"] == 60.0
    with pytest.raises(LedgerError, match=r"run d/x/seed=1 \(id .*\) is held in .* with other kept_step, values"):
        store.add(make_entry("d", "x", 1, _values(1, shift=0.1), kept_step=200))
    assert len(store.paths()) == 1


def test_a_ledger_of_another_study_config_is_refused_naming_the_keys(tmp_path):
    mine = manifest(SETTINGS, [5, 10], CLAIMS)
    store = Ledger(tmp_path)
    store.write_manifest(mine)
    store.check_manifest(mine)
    other = manifest({**SETTINGS, "alpha": 0.1}, [5, 10, 15], [{**CLAIMS[0], "expect": "worse"}])
    assert manifest_differences(mine, other) == ["alpha", "looks", "claims.c"]
    with pytest.raises(LedgerError, match="made under another study config: alpha, looks, claims.c differ"):
        store.check_manifest(other)


def _whole(tmp_path: Path) -> list:
    return [make_entry("d", arm, seed, _values(seed, 0.01 * (arm == "x"))) for arm in ("x", "baseline")
            for seed in (1, 2, 3)]


def test_two_halves_merge_into_the_whole_in_any_order(tmp_path):
    entries = _whole(tmp_path)
    whole, a, b = Ledger(tmp_path / "whole"), Ledger(tmp_path / "a"), Ledger(tmp_path / "b")
    for i, entry in enumerate(entries):
        whole.add(entry)
        (a if i < 4 else b).add(entry)
        if i == 3:
            b.add(entry)  # one run on both machines: the same values
    for ledger in (whole, a, b):
        ledger.write_manifest(manifest(SETTINGS, [5, 10], CLAIMS))
    report = merge_ledgers([a.root, b.root], tmp_path / "ab")
    assert (report.added, report.held, report.sources) == (6, 0, 2)
    merge_ledgers([b.root, a.root], tmp_path / "ba")
    for merged in ("ab", "ba"):
        files = sorted(p.relative_to(tmp_path / merged) for p in (tmp_path / merged).rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(whole.root) for p in whole.root.rglob("*") if p.is_file())
        assert all((tmp_path / merged / f).read_bytes() == (whole.root / f).read_bytes() for f in files)
    again = merge_ledgers([a.root], tmp_path / "ab")
    assert (again.added, again.held) == (0, 4)


def test_a_merge_refuses_conflicts_other_studies_and_broken_files_and_writes_nothing(tmp_path):
    entry = make_entry("d", "x", 1, _values(1))
    a, b = Ledger(tmp_path / "a"), Ledger(tmp_path / "b")
    a.add(entry)
    b.add(make_entry("d", "x", 2, _values(2)))
    clash = make_entry("d", "x", 1, _values(1, shift=0.2))
    write_entry(entry_path(b.root, entry.record), clash.__class__(clash.values, entry.record))
    with pytest.raises(LedgerError, match=r"run d/x/seed=1 .* other values"):
        merge_ledgers([a.root, b.root], tmp_path / "into")
    assert not (tmp_path / "into").exists()
    shutil.rmtree(b.root)
    b.add(make_entry("d", "x", 2, _values(2)))
    a.write_manifest(manifest(SETTINGS, [5, 10], CLAIMS))
    b.write_manifest(manifest({**SETTINGS, "equivalence_margin": 0.05}, [5, 10], CLAIMS))
    with pytest.raises(LedgerError, match="made under another study config than .*: equivalence_margin differ"):
        merge_ledgers([a.root, b.root], tmp_path / "into")
    (b.root / "study.json").unlink()
    broken = b.paths()[0]
    broken.write_bytes(broken.read_bytes()[:100])
    with pytest.raises(InputFormatError, match="unreadable ledger entry") as err:
        merge_ledgers([a.root, b.root], tmp_path / "into")
    assert str(err.value).startswith(str(broken))
    assert not (tmp_path / "into").exists() and len(a.paths()) == 1  # nothing lost from the others


def _record(arm: str, run_id: str, **upstream: str) -> dict:
    return {"dataset": "d", "arm": arm, "seed": 1, "run_id": run_id, "upstream": upstream}


def test_a_seeds_arms_are_paired_only_when_the_tables_they_share_agree():
    # the teacher's curriculum differs between two machines; the baseline never read it
    candidates = {"penha": [_record("penha", "b", data="1", teacher="T2"), _record("penha", "a", data="2")],
                  "baseline": [_record("baseline", "c", data="1")],
                  "kde": [_record("kde", "d", data="1", teacher="T1")]}
    assert choose_seed(candidates) is None  # penha's teacher T2 clashes with kde's T1; its other entry with the data
    candidates["kde"].append(_record("kde", "e", data="1", teacher="T2"))
    chosen = choose_seed(candidates)
    assert {arm: r["run_id"] for arm, r in chosen.items()} == {"baseline": "c", "kde": "e", "penha": "b"}
    assert choose_seed({"x": []}) is None


def test_a_study_trains_only_what_the_ledger_lacks_and_retrains_a_split_seed_here():
    held = [_record("x", "a", data="1"), _record("baseline", "b", data="1")]
    wanted = [("d", "x", 1), ("d", "baseline", 1), ("d", "x", 2)]
    train, chosen = plan_runs(held, wanted)
    assert train == [("d", "x", 2)] and set(chosen) == {("d", "x", 1), ("d", "baseline", 1)}
    # partly held: the arm the ledger lacks trains, the held one is kept
    train, chosen = plan_runs(held[:1], wanted[:2])
    assert train == [("d", "baseline", 1)] and list(chosen) == [("d", "x", 1)]
    # the held x disagrees with the baseline trained here: the seed is retrained whole here
    split = [held[0], _record("baseline", "c", data="2")]
    train, chosen = plan_runs(split, wanted[:2], local={("d", "baseline", 1)})
    assert train == [("d", "x", 1)] and chosen == {}
    with pytest.raises(LedgerError, match=r"d seed 1: its arms trained on different upstream tables \(data 2 for "
                                          r"baseline, 1 for x\), so they cannot be paired; run the study again"):
        select_entries(split, wanted[:2])
    with pytest.raises(LedgerError, match="the ledger holds no run of d/x/seed=2"):
        select_entries(held, wanted)


def test_the_judging_rules_read_the_ledger_and_count_its_cost(tmp_path):
    store = Ledger(tmp_path / "ledger")
    paths = {}
    for entry in _whole(tmp_path):
        paths[(entry.record["dataset"], entry.record["arm"], entry.record["seed"])] = store.add(entry)
    # a run trained here: its results-side copy is added back to a ledger that lost it
    local = make_entry("d", "x", 4, _values(4))
    copy = write_entry(tmp_path / "results" / "x4.parquet", local)
    runs = {("d", "x+bm25", s): str(paths[("d", "x", s)]) for s in (1, 2, 3)} | {("d", "x+bm25", 4): str(copy)}
    entries = gather(store.root, runs)
    assert entry_path(store.root, local.record).is_file()
    frame = claim_frames(entries)["d"]
    assert set(frame["experiment"]) == {"x+bm25"} and frame["seed"].unique().sort().to_list() == ["1", "2", "3", "4"]
    assert frame["value"].dtype == pl.Float64
    costs = ledger_costs(used_records(entries))
    assert costs.row(0, named=True) == {"dataset": "d", "runs": 4, "core_hours": pytest.approx(240 / 3600),
                                        "peak_rss_mb": 900.0, "machines": 1, "compute_classes": 1,
                                        "upstream_variants": 1, "commits": 1}
    assert upstream_variants([_record("x", "a", t="1"), _record("y", "b", t="2"), _record("z", "c", u="1")]) == 2


def test_provenance_helpers(tmp_path):
    assert cpu_class("flags\t: fpu avx2 avx512f avx512_bf16\n").endswith(" avx512_bf16")
    assert cpu_class("flags\t: fpu sse2\n").endswith(" baseline")
    folder = tmp_path / "index"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a").write_text("1")
    before = file_digest(folder)
    (folder / "sub" / "a").write_text("2")
    assert file_digest(folder) != before and len(before) == 16
    curve = pl.DataFrame({"step": [100, 200, 300], "value": [0.5, 0.6, 0.55], "best": [False, True, False],
                          "stopped": [None, None, "early_stopping"]})
    assert curve_summary(curve) == {"kept_step": 200, "best_dev": 0.6, "stopped": "early_stopping"}
    assert curve_summary(None) == {"kept_step": None, "best_dev": None, "stopped": None}


def test_the_machine_key_tells_cloned_machines_and_cluster_nodes_apart(tmp_path):
    import socket
    from concurrent.futures import ThreadPoolExecutor

    from curricula.plumbing.provenance import local_id, machine_key

    system = tmp_path / "machine-id"
    system.write_text("3d1219c7c4c5404aaa1f6d2a48adfda4\n")
    one, two = tmp_path / "home1", tmp_path / "home2"
    key = machine_key(one, (tmp_path / "absent", system))
    assert key.startswith("3d1219c7c4c5404aaa1f6d2a48adfda4/") and machine_key(one, (system,)) == key  # kept
    assert machine_key(two, (system,)) != key  # a clone of the image: same system id, its own random id
    other = tmp_path / "other-id"
    other.write_text("ffff\n")
    assert machine_key(one, (other,)) != key  # a cluster node sharing the home: another system id
    with ThreadPoolExecutor(8) as pool:  # jobs asking at once for the first time all get the one id kept
        ids = set(pool.map(lambda _: local_id(tmp_path / "race"), range(32)))
    assert ids == {(tmp_path / "race" / "machine_id").read_text().strip()}
    assert [p.name for p in (tmp_path / "race").iterdir()] == ["machine_id"]  # no temporary file left
    (tmp_path / "file").write_text("")
    assert machine_key(tmp_path / "file" / "sub", ()) == "/host:" + socket.gethostname()  # not writable


def _table(path: Path, frame: pl.DataFrame) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    return str(path)


def test_the_entry_rule_reads_a_runs_files_and_appends_it(tmp_path):
    import json

    from curricula.active.loop import ACTIVE_TEST_METRICS
    from curricula.plumbing.contracts import write_table
    from curricula.stages.study import study_ledger_entry

    root, bench = tmp_path / "results" / "d", tmp_path / "benchmarks" / "d"
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for rel, cpu, rss in (("train/x/seed=1.tsv", 90, 600), ("evaluate/x/seed=1.tsv", 5, 700),
                          ("active/dasl/seed=1.tsv", 300, 800)):
        (bench / rel).parent.mkdir(parents=True, exist_ok=True)
        (bench / rel).write_text(header + f"10\t0:00:10\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    metrics = pl.DataFrame({"qid": ["q1", "q2"], "measure": ["AP", "AP"], "value": [0.5, 0.25]})
    queries = _table(root / "data" / "queries.parquet", pl.DataFrame({"qid": ["q1"]}))
    run = root / "experiments" / "x" / "seed=1"
    config = run / "config.json"
    inputs = {"metrics": _table(run / "metrics.parquet", metrics),
              "additive_metrics": _table(run / "metrics+bm25.parquet", metrics.with_columns(value=pl.lit(0.75))),
              "curve": _table(run / "dev_curve.parquet", pl.DataFrame(
                  {"step": [100, 200], "value": [0.4, 0.6], "best": [False, True], "stopped": [None, "patience"]})),
              "config": str(config), "upstream|data/queries.parquet": queries}
    config.write_text(json.dumps({"ran_on": {"device": "cpu", "dtype": "fp32", "gpu": None, "capability": None,
                                             "torch": "2.13.0+cpu", "cuda": None, "cpu": "x86_64 avx2"},
                                  "commit": "abc"}))
    settings = manifest(SETTINGS, [5, 10], CLAIMS)
    out = tmp_path / "entries" / "x.parquet"
    entry = study_ledger_entry(inputs, out, dataset="d", arm="x", seed=1, spec_digest="s", root=root,
                               benchmarks=bench, ledger=tmp_path / "ledger", manifest=settings)
    assert read_entry(out).record == entry.record and Ledger(tmp_path / "ledger").records() == [entry.record]
    assert sorted(set(entry.values["experiment"])) == ["x", "x+bm25"]
    assert {k: entry.record[k] for k in ("kept_step", "best_dev", "stopped", "cpu_seconds", "peak_rss_mb",
                                         "commit")} == {"kept_step": 200, "best_dev": 0.6, "stopped": "patience",
                                                        "cpu_seconds": 95.0, "peak_rss_mb": 700.0, "commit": "abc"}
    assert list(entry.record["upstream"]) == ["data/queries.parquet"]
    assert Ledger(tmp_path / "ledger").read_manifest() == settings
    active = tmp_path / "a.parquet"
    write_table(pl.DataFrame({"round": [0, 1], "qid": ["q1", "q1"], "measure": ["AP", "AP"], "value": [0.1, 0.2]},
                             schema=ACTIVE_TEST_METRICS.columns), active, ACTIVE_TEST_METRICS)
    loop = study_ledger_entry({"active": active, "upstream|data/queries.parquet": queries}, tmp_path / "a.out",
                              dataset="d", arm="active:dasl", seed=1, spec_digest="s", root=root, benchmarks=bench,
                              ledger=tmp_path / "ledger", manifest=settings)
    assert loop.record["kind"] == "active" and loop.record["cpu_seconds"] == 300.0
    assert sorted(loop.values["experiment"]) == ["active:dasl@0", "active:dasl@1"]
    with pytest.raises(LedgerError, match="made under another study config: alpha differ"):
        study_ledger_entry(inputs, out, dataset="d", arm="x", seed=1, spec_digest="s", root=root, benchmarks=bench,
                           ledger=tmp_path / "ledger", manifest={**settings, "alpha": 0.01})


def test_the_ledger_commands_merge_and_say_what_to_fix_in_one_line(tmp_path, capsys):
    from curricula.cli import main

    source = Ledger(tmp_path / "theirs")
    source.add(make_entry("d", "x", 1, _values(1)))
    assert main(["ledger", "merge", str(source.root), "--into", str(tmp_path / "ours")]) == 0
    assert "1 run(s) added, 0 already held, from 1 ledger(s)" in capsys.readouterr().out
    broken = source.paths()[0]
    broken.write_bytes(b"PAR1 not really")
    assert main(["ledger", "merge", str(source.root), "--into", str(tmp_path / "ours")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {broken}: unreadable ledger entry") and "\n" not in err
