"""A reconciler pass's budget: steps and parts begin while it lasts, the pass's first move
and (where nothing moved) the fill's first part in any case, and what is left is counted
for the next pass."""

from __future__ import annotations

from orchestrator.pass_budget import PassBudget
from tests.support.clock import Clock


def test_parts_begin_while_the_budget_lasts_and_the_rest_is_counted() -> None:
    clock = Clock()
    budget = PassBudget(1.0, clock)
    taken = []
    for part in budget.move_parts("lease expired", list(range(10)), 3):
        taken.append(list(part))
        clock.now += 0.4  # each part takes 0.4 s: the third begins at 0.8 s, none after
    assert taken == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert budget.deferred == {"lease expired": 1}


def test_the_first_move_runs_spent_or_not_and_only_the_first() -> None:
    clock = Clock()
    budget = PassBudget(0.5, clock)
    clock.now += 2.0  # the pass's reads took the whole budget
    assert [list(p) for p in budget.move_parts("lease expired", [], 5)] == []  # no work
    assert budget.begins("off lost devices", 7)
    assert not budget.begins("relocate", 4)
    assert not budget.begins("home", 0)  # nothing to do is nothing left
    assert budget.deferred == {"relocate": 4}


def test_the_fill_waits_for_the_next_pass_after_a_move_spent_the_budget() -> None:
    clock = Clock()
    budget = PassBudget(0.5, clock)
    assert budget.begins("relocate", 3)
    clock.now += 1.0
    assert [list(p) for p in budget.fill_parts(["d1", "d2", "d3"], 2)] == []
    assert budget.deferred == {"fill": 3}


def test_the_fill_gets_its_first_part_where_nothing_moved() -> None:
    clock = Clock()
    budget = PassBudget(0.5, clock)
    clock.now += 1.0
    assert [list(p) for p in budget.fill_parts(["d1", "d2", "d3"], 2)] == [["d1", "d2"]]
    assert budget.deferred == {"fill": 1}


def test_a_pass_within_its_budget_defers_nothing() -> None:
    budget = PassBudget(10.0)
    assert budget.begins("off lost devices", 3) and budget.begins("relocate", 2)
    assert [list(p) for p in budget.move_parts("lease expired", list(range(5)), 2)] == [
        [0, 1],
        [2, 3],
        [4],
    ]
    assert [list(p) for p in budget.fill_parts(list("abc"), 2)] == [["a", "b"], ["c"]]
    assert budget.deferred == {}


def test_a_fill_part_begins_only_where_one_like_the_last_would_end_in_time() -> None:
    clock = Clock()
    budget = PassBudget(1.0, clock)
    taken = []
    for part in budget.fill_parts(list(range(8)), 2):
        taken.append(list(part))
        clock.now += 0.3  # the third would begin at 0.6 s and end at 0.9: it begins
    assert taken == [[0, 1], [2, 3], [4, 5]]  # the fourth would end at 1.2 s: left
    assert budget.deferred == {"fill": 2}
