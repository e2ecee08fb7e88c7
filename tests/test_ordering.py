"""The suite's collection order for pytest-xdist's worksteal scheduler (tests/ordering.py)."""

from __future__ import annotations

import pytest

from tests.ordering import balanced_order, worksteal_shares


class _Node:
    """What xdist's scheduler calls on a worker: records the test indices it is sent."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:  # a worker with too few tests to share is told to finish them
        self.shutting_down = True


@pytest.mark.parametrize(("count", "workers"), [(10, 2), (11, 2), (10, 3), (1101, 3), (5, 4)])
def test_the_shares_are_those_xdists_worksteal_scheduler_hands_out(count, workers):
    """worksteal_shares gives, in order, how many tests xdist's own WorkStealingScheduling first sends each worker,
    and they are contiguous runs of the collection (what balanced_order relies on)."""
    from xdist.scheduler import WorkStealingScheduling

    config = type("Config", (), {"getvalue": lambda self, name: [f"{workers}*popen"] if name == "tx" else None})()
    scheduler = WorkStealingScheduling(config)
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    ids = [f"t{i}" for i in range(count)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, ids)
    scheduler.schedule()
    assert [len(node.sent) for node in nodes] == worksteal_shares(count, workers)
    assert [i for node in nodes for i in node.sent] == list(range(count))


def test_each_share_starts_with_its_part_of_the_long_tests_balanced_longest_first():
    names = [f"short{i}" for i in range(6)] + ["a", "b", "c", "d"]
    seconds = {"a": 100, "b": 90, "c": 60, "d": 40}
    order = balanced_order(names, seconds, workers=2)
    assert sorted(order) == list(range(len(names)))  # a permutation: every test runs once
    first, second = [names[i] for i in order[:5]], [names[i] for i in order[5:]]
    # longest first to the lighter share: a (100) | b (90) | c to b's share (150) | d to a's share (140)
    assert first == ["a", "d", "short0", "short1", "short2"]
    assert second == ["b", "c", "short3", "short4", "short5"]


def test_a_share_other_than_the_first_starts_with_a_long_test_that_does_not_wait_for_the_shared_run():
    names = ["a", "b", "c", "d", "s0", "s1"]
    seconds = {"a": 100, "b": 90, "c": 60, "d": 40}
    waits = {0, 1}  # a and b need the shared tiny run
    order = [names[i] for i in balanced_order(names, seconds, workers=2, waits=waits)]
    assert order == ["a", "d", "s0", "c", "b", "s1"]  # the second worker starts with c while the first builds the run


def test_without_long_tests_the_file_order_stays():
    assert balanced_order(["x", "y", "z"], {}, workers=2) == [0, 1, 2]


def test_every_long_test_named_in_the_table_exists():
    """A renamed or removed test would silently drop out of the dealing (it would run in file order): each name
    of LONGEST is a test function of the suite."""
    import re
    from pathlib import Path

    from tests.ordering import LONGEST

    defined = {name for path in Path(__file__).parent.glob("test_*.py")
               for name in re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), flags=re.M)}
    assert set(LONGEST) <= defined, sorted(set(LONGEST) - defined)
