"""Curriculum data (stage ``curriculum``): training instances sorted easy -> hard by one scoring function, sharded.

Penha & Hauff 2020 §3: "the scoring function f_score(U_i, R_i, Y_i) is used to sort the training dataset"; the
ranker then samples uniformly from the easiest f_pace(s) * |D_train| instances (:class:`CurriculumSampler`). Su et
al. 2021 Algorithm 1 line 2 samples uniformly from the instances with corpus difficulty f_d <= f_p(t): with the
instances sorted by difficulty that set is again a prefix, found by a search in the sorted difficulties.

An **instance** is one relevant training pair (qid, positive docid): a conversation context with its true
response, or a question with one of its correct answers. Its ``difficulty`` (in [0, 1], 1 = hardest) is the scoring
function's value for that pair in the difficulty table: the query's value for the query-level functions (Penha
Table 2, HCL eq. 2), and 1 - D_point of the positive for MacAvaney's pair-level functions. Negatives are attached
at training time (:mod:`curricula.curriculum.negatives`).

On disk, ``curricula/<scoring>/`` holds ``shard-00000.parquet`` ... (columns position, qid, docid, difficulty,
raw; ``position`` 0 is the easiest) and ``index.parquet`` (one row per shard: first position, row count, min and
max difficulty), so a sampler opens only the shards it draws from and finds a threshold's prefix from the index.
Ties in difficulty are broken by a seeded random key, so the order is a total order fixed by (scores, seed).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import polars as pl

from curricula.curriculum.pacing import Pacing
from curricula.plumbing.atomic import write_dir_atomically
from curricula.plumbing.contracts import TableSpec, check_table, read_table

log = logging.getLogger(__name__)

INSTANCES = TableSpec(
    "curriculum",
    {"position": pl.Int64, "qid": pl.String, "docid": pl.String, "difficulty": pl.Float64, "raw": pl.Float64},
    key=("position",),
)
SHARD_INDEX = TableSpec(
    "curriculum_index",
    {"shard": pl.String, "start": pl.Int64, "rows": pl.Int64, "min_difficulty": pl.Float64,
     "max_difficulty": pl.Float64},
    key=("shard",),
)


def training_instances(table: pl.DataFrame, scoring: str) -> pl.DataFrame:
    """One instance per relevant pair of a difficulty table: (qid, docid, difficulty, raw) for ``scoring``."""
    if scoring not in table.columns:
        raise ValueError(f"scoring function {scoring!r} is not in the difficulty table (columns {table.columns})")
    out = table.filter(pl.col("rel") > 0).select(
        "qid", "docid", pl.col(scoring).cast(pl.Float64).alias("difficulty"),
        pl.col(f"{scoring}_raw").cast(pl.Float64).alias("raw"),
    )
    if out.height == 0:
        raise ValueError("the difficulty table has no relevant training pair: nothing to train on")
    return out


def curriculum_order(instances: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Instances sorted by difficulty ascending (easy first), ties by a seeded random key; adds ``position``."""
    base = instances.sort("qid", "docid")
    tie = np.random.default_rng(seed).permutation(base.height)
    return (
        base.with_columns(_tie=pl.Series(tie, dtype=pl.Int64))
        .sort("difficulty", "_tie")
        .drop("_tie")
        .with_row_index("position")
        .with_columns(pl.col("position").cast(pl.Int64))
        .select(list(INSTANCES.columns))
    )


def shard_name(i: int) -> str:
    return f"shard-{i:05d}.parquet"


def write_curriculum(ordered: pl.DataFrame, out_dir: str | Path, shard_size: int) -> pl.DataFrame:
    """Write ``ordered`` as shards of ``shard_size`` rows plus ``index.parquet``, atomically; returns the index."""
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    check_table(ordered, INSTANCES, "curriculum")
    n_shards = max(1, math.ceil(ordered.height / shard_size))
    rows = []
    for i in range(n_shards):
        part = ordered.slice(i * shard_size, shard_size)
        rows.append((shard_name(i), i * shard_size, part.height, part["difficulty"].min(), part["difficulty"].max()))
    index = pl.DataFrame(rows, schema=SHARD_INDEX.columns, orient="row")

    def fill(tmp: Path) -> None:
        for i in range(n_shards):
            ordered.slice(i * shard_size, shard_size).write_parquet(tmp / shard_name(i))
        index.write_parquet(tmp / "index.parquet")

    write_dir_atomically(out_dir, fill)
    return index


def build_curriculum(table: pl.DataFrame, out_dir: str | Path, scoring: str, *, shard_size: int,
                     seed: int) -> pl.DataFrame:
    """Rule ``curriculum``: the training instances of the difficulty ``table`` in ``scoring`` order (ties by the
    ``seed``ed key), written into ``out_dir`` in shards of ``shard_size`` (:func:`write_curriculum`) and logged;
    returns the shard index."""
    ordered = curriculum_order(training_instances(table, scoring), seed)
    index = write_curriculum(ordered, out_dir, shard_size)
    d = ordered["difficulty"]
    log.info("curriculum %s: %d instances of %d queries in %d shard(s); difficulty easiest %.4f, median %.4f, "
             "hardest %.4f", scoring, ordered.height, ordered["qid"].n_unique(), index.height, d[0],
             d.median(), d[-1])
    return index


class Curriculum:
    """Read side of a curriculum folder: length, threshold prefixes and gathers, opening shards lazily.

    Memory is the index plus the shards actually touched; a gather of B positions costs O(B) once its shards are
    open, whatever the number of instances.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.index = read_table(self.folder / "index.parquet", SHARD_INDEX)
        self.starts = self.index["start"].to_numpy()
        self.rows = self.index["rows"].to_numpy()
        self.max_difficulty = self.index["max_difficulty"].to_numpy()
        self._shards: dict[int, dict[str, np.ndarray]] = {}

    def __len__(self) -> int:
        return int(self.rows.sum())

    def shard(self, i: int) -> dict[str, np.ndarray]:
        """Shard ``i`` as one numpy array per column (opened once, then cached)."""
        if i not in self._shards:
            path = self.folder / self.index["shard"][i]
            frame = read_table(path, INSTANCES)
            if frame.height != self.rows[i] or (frame.height and frame["position"][0] != self.starts[i]):
                raise ValueError(f"{path}: does not match {self.folder / 'index.parquet'} (rows or first position)")
            self._shards[i] = {c: frame[c].to_numpy() for c in INSTANCES.columns}
        return self._shards[i]

    def count_at_most(self, threshold: float) -> int:
        """Number of instances with difficulty <= ``threshold`` (a prefix, since they are sorted)."""
        i = int(np.searchsorted(self.max_difficulty, threshold, side="right"))  # shards 0..i-1 lie wholly below
        if i >= len(self.rows):
            return len(self)
        return int(self.starts[i] + np.searchsorted(self.shard(i)["difficulty"], threshold, side="right"))

    def take(self, positions: np.ndarray) -> pl.DataFrame:
        """The instances at ``positions`` (any order, repeats allowed), in that order.

        Cost: one numpy gather per touched shard (at most min(B, shards)) plus one small frame, O(B).
        """
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= len(self)):
            raise IndexError(f"curriculum positions out of range [0, {len(self)})")
        which = np.searchsorted(self.starts, positions, side="right") - 1
        out = {c: np.empty(positions.size, dtype=object if dtype == pl.String else np.float64)
               for c, dtype in INSTANCES.columns.items()}
        out["position"] = positions.copy()
        for i in np.unique(which):
            sel = np.flatnonzero(which == i)
            shard, rows = self.shard(int(i)), positions[sel] - self.starts[i]
            for c in ("qid", "docid", "difficulty", "raw"):
                out[c][sel] = shard[c][rows]
        return pl.DataFrame({c: pl.Series(c, out[c], dtype=dtype) for c, dtype in INSTANCES.columns.items()})


class CurriculumSampler:
    """Which instances step ``s`` may draw, and a batch drawn uniformly from them (Penha §3, Su Algorithm 1).

    ``pacing`` is an experiment's resolved :class:`curricula.curriculum.pacing.Pacing` (the arm's,
    :func:`curricula.experiments.spec.
    resolve_arm`; its ``T`` already in steps of the curriculum's length): in ``fraction`` mode the
    allowed set is the easiest ceil(f(s) * N) instances, in ``threshold`` mode the instances with difficulty <=
    f(s). At least ``min_allowed`` instances are always allowed (a threshold below every difficulty would
    otherwise leave nothing to train on). Batches are drawn with replacement from a generator seeded by
    (seed, step), so batch s is a pure function of (curriculum, pacing, seed, s): a resumed run draws exactly the
    batches an uninterrupted one would, with no sampler state to save.
    """

    def __init__(self, curriculum: Curriculum, pacing: Pacing, batch_size: int, seed: int,
                 min_allowed: int | None = None):
        if not isinstance(pacing, Pacing):
            raise TypeError("CurriculumSampler takes a resolved Pacing (curricula.curriculum.pacing.resolve_pacing), "
                            f"got {type(pacing).__name__}")
        self.curriculum = curriculum
        self.pacing = pacing
        self.mode = pacing.mode
        self.batch_size = batch_size
        self.seed = seed
        self.min_allowed = min(len(curriculum), batch_size if min_allowed is None else min_allowed)

    def pace(self, step: int) -> float:
        return float(np.asarray(self.pacing.value(step)))

    def allowed(self, step: int) -> int:
        """Size of the prefix of the curriculum that step ``step`` samples from."""
        n = len(self.curriculum)
        value = self.pace(step)
        count = math.ceil(value * n - 1e-9) if self.mode == "fraction" else self.curriculum.count_at_most(value)
        return int(min(n, max(self.min_allowed, count)))

    def positions(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step, 0])
        return rng.integers(0, self.allowed(step), size=self.batch_size, dtype=np.int64)

    def batch(self, step: int) -> pl.DataFrame:
        """The instances (position, qid, docid, difficulty, raw) of training step ``step``."""
        return self.curriculum.take(self.positions(step))
