"""Which seeds a study's rounds train (config ``study.sequential``): the looks (:func:`study_looks`) and each look's
seeds (:func:`look_seeds`). Pure functions on numbers, apart from :mod:`curricula.study.rounds` (which judges the
cells after a round) so that the start-up checks and the study's plan read them without importing the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence


def study_looks(looks: Sequence[int], max_seeds: int | None = None) -> tuple[int, ...]:
    """The looks a study runs: ``looks`` (strictly increasing seed counts, the first at least 2: the seed-aware test
    needs two seeds for its seed term) capped at ``max_seeds``. Looks above the cap are dropped and a cap between two
    looks becomes the last look ((5, 10, 15, 20) capped at 12: (5, 10, 12)); a cap above the last look changes
    nothing; a cap below the first look is refused.
    Raises ValueError naming the config key."""
    looks = tuple(int(s) for s in looks)
    if not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"study.sequential.looks must be strictly increasing seed counts, the first at least 2 (the "
                         f"seed-aware test needs two seeds), got {list(looks)}")
    if max_seeds is None:
        return looks
    if max_seeds < looks[0]:
        raise ValueError(f"study.max_seeds {max_seeds} is below the first look ({looks[0]} seeds); lower "
                         f"study.sequential.looks or raise the cap")
    kept = tuple(s for s in looks if s <= max_seeds)
    return kept if kept[-1] == max_seeds or max_seeds > looks[-1] else (*kept, max_seeds)


def look_seeds(seeds: Sequence[int], count: int) -> list[int]:
    """The first ``count`` seeds of ``seeds`` extended past its largest seed by consecutive integers: the seeds of a
    look of ``count`` seeds ([1, 2, 3, 4] and 6 -> [1, 2, 3, 4, 5, 6]; [7, 3] and 4 -> [7, 3, 8, 9])."""
    out = list(seeds)[:count]
    nxt = max(seeds) + 1
    while len(out) < count:
        out.append(nxt)
        nxt += 1
    return out


__all__ = ["look_seeds", "study_looks"]
