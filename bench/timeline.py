"""How busy a run kept the cores (issue 32, job/thread layout): every job's start, end and threads from Snakemake's own
log, then the share of core-seconds used and the seconds a core sat idle while the run went on.

    python bench/timeline.py .snakemake/log/<newest>.snakemake.log [--cores 2] [--jobs]

A run whose cores stay busy cannot be shortened by reordering its jobs or splitting their threads: its wall time is
its core-seconds over the cores, so only less work shortens it. Times are Snakemake's one-second stamps ("[Thu Nov
26 04:54:17 2026]" before each job and each "Finished jobid"); a job's threads are its "threads:" line (1 when
absent). Jobs still running when the log ends are left out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

STAMP = re.compile(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")  # at a line's end: progress bars precede it
RULE = re.compile(r"^(?:local)?rule (\w+):$")


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: str
    threads: int
    start: dt.datetime
    end: dt.datetime


def parse_jobs(text: str) -> list[Job]:
    """Finished jobs of a Snakemake log, in start order."""
    lines = text.splitlines()
    now: dt.datetime | None = None
    running: dict[str, tuple[str, str, int, dt.datetime]] = {}
    jobs: list[Job] = []
    for i, line in enumerate(lines):
        if m := STAMP.search(line.strip()):
            now = dt.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
            continue
        if (m := RULE.match(line.strip())) and now is not None:
            jobid, wildcards, threads = None, "", 1
            for follow in lines[i + 1:i + 25]:
                key, _, value = follow.strip().partition(": ")
                if RULE.match(follow.strip()) or STAMP.search(follow.strip()):
                    break
                if key == "jobid":
                    jobid = value
                elif key == "wildcards":
                    wildcards = value
                elif key == "threads":
                    threads = int(value)
            if jobid is not None:
                running[jobid] = (m.group(1), wildcards, threads, now)
            continue
        if (m := re.search(r"Finished jobid: (\d+)", line)) and m.group(1) in running and now is not None:
            rule, wildcards, threads, start = running.pop(m.group(1))
            jobs.append(Job(rule, wildcards, threads, start, now))
    return sorted(jobs, key=lambda j: (j.start, j.rule, j.wildcards))


def utilisation(jobs: list[Job], cores: int) -> dict[str, float]:
    """Wall seconds from the first start to the last end, core-seconds used (threads x seconds, at most ``cores``
    at any second), their share of ``cores`` x wall, and the seconds with at least one core idle."""
    t0 = min(j.start for j in jobs)
    wall = int((max(j.end for j in jobs) - t0).total_seconds())
    busy = [0] * wall
    for j in jobs:
        for s in range(int((j.start - t0).total_seconds()), int((j.end - t0).total_seconds())):
            busy[s] += j.threads
    used = sum(min(b, cores) for b in busy)
    return {"wall_s": wall, "core_s": used, "share": used / (cores * wall) if wall else 1.0,
            "seconds_a_core_idle": sum(1 for b in busy if b < cores)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--jobs", action="store_true", help="also list every job: start, end, seconds, threads")
    args = parser.parse_args()
    jobs = parse_jobs(args.log.read_text())
    if not jobs:
        raise SystemExit(f"{args.log}: no finished job found (is it a Snakemake log?)")
    if args.jobs:
        t0 = jobs[0].start
        for j in jobs:
            s, e = (j.start - t0).total_seconds(), (j.end - t0).total_seconds()
            print(f"{s:6.0f} {e:6.0f} {e - s:5.0f}  t{j.threads}  {j.rule} {j.wildcards}")
    u = utilisation(jobs, args.cores)
    by_threads: dict[int, float] = {}
    for j in jobs:
        by_threads[j.threads] = by_threads.get(j.threads, 0.0) + (j.end - j.start).total_seconds()
    print(f"{len(jobs)} jobs, wall {u['wall_s']:.0f} s on {args.cores} cores: {u['core_s']:.0f} core-seconds used "
          f"({u['share']:.0%}), a core idle during {u['seconds_a_core_idle']:.0f} s")
    for threads, seconds in sorted(by_threads.items()):
        print(f"  {threads}-thread jobs: {seconds:.0f} job-seconds")


if __name__ == "__main__":
    main()
