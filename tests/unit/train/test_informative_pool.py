"""The informative state pool (issue 23.3): weighted, seeded draws from what each state taught."""

import numpy as np
import pytest

from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.train.informative_pool import InformativePool, weighted_order
from searchgrpo.train.state_pool import HISTORY_KEYS, StatePool


def states(n):
    return [SearchState(f"s{i:03d}", f"q{i // 2}", "?", (), 1, RoundState(), ()) for i in range(n)]


def test_weighted_order_draws_first_in_proportion_to_weight():
    rng = np.random.default_rng(0)
    weights = [1.0, 0.1, 1.0, 0.1]
    firsts = np.bincount([weighted_order(rng, weights)[0] for _ in range(4000)], minlength=4) / 4000
    assert firsts == pytest.approx([1 / 2.2, 0.1 / 2.2, 1 / 2.2, 0.1 / 2.2], abs=0.03)
    assert sorted(weighted_order(np.random.default_rng(1), weights)) == [0, 1, 2, 3]


def test_states_whose_groups_taught_nothing_are_drawn_less_then_retried():
    pool = InformativePool(states(40), 4, seed=3, weight=0.05, retry=10)
    # Step 0 finds half the states uninformative (usefulness 2: zero variance; 1: the same finds).
    dull = {f"s{i:03d}" for i in range(20)}
    pool.observe(0, [(s.state_id, 2 if s.state_id in dull else 0) for s in pool.original[:30]])
    pool.observe(0, [("s010", 1)])
    assert pool.weight_of("s005", 1) == 0.05 and pool.weight_of("s025", 1) == 1.0
    assert pool.weight_of("s005", 10) == 1.0  # retried after `retry` steps
    drawn = [s.state_id for i in range(1, 10) for s in pool.states_for_step(i)[1]]
    # 20 states of weight 1 against 20 of 0.05: about 1 in 21 draws is a dull one.
    assert sum(d in dull for d in drawn) <= 6 and len(drawn) == 36
    refills = pool.refill(3, 1, 12, exclude={"s030"})
    assert len(refills) == 12 and "s030" not in {s.state_id for s in refills}
    assert sum(s.state_id in dull for s in refills) <= 3
    # An informative group clears a state's miss.
    pool.observe(1, [("s005", 0)])
    assert pool.weight_of("s005", 2) == 1.0


def test_draws_are_seeded_and_resume_from_the_saved_memory():
    a = InformativePool(states(30), 3, seed=1, weight=0.1, retry=50)
    b = InformativePool(states(30), 3, seed=1, weight=0.1, retry=50)  # another rank, or a resumed run
    for step in range(6):
        assert a.states_for_step(step) == b.states_for_step(step)
        assert a.refill(step, 1, 5, set()) == b.refill(step, 1, 5, set())
        outcome = [(s.state_id, step % 2) for s in a.states_for_step(step)[1]]
        a.observe(step, outcome)
        b.observe(step, outcome)
    resumed = InformativePool(states(30), 3, seed=1, weight=0.1, retry=50)
    resumed.load_state_dict(a.state_dict())
    assert [resumed.states_for_step(s) for s in range(6, 12)] == [a.states_for_step(s) for s in range(6, 12)]
    assert a.state_dict()["missed_at"] and all(isinstance(v, int) for v in a.state_dict()["missed_at"].values())


def test_the_epoch_pool_keeps_its_order_whatever_the_states_taught():
    pool = StatePool(states(12), 3, seed=0)
    before = [pool.states_for_step(i) for i in range(8)]
    pool.observe(0, [("s000", 2)])
    assert [pool.states_for_step(i) for i in range(8)] == before
    assert pool.state_dict() == {"last_taught": {"s000": False}}
    assert pool.states_for_step(4)[0] == 1  # 4 steps an epoch


@pytest.mark.parametrize(
    "make", [lambda: StatePool(states(6), 2, seed=0), lambda: InformativePool(states(6), 2, seed=0)]
)
def test_each_steps_groups_are_counted_by_what_their_states_taught_before(make):
    pool = make()
    first = pool.observe(0, [("s000", 0), ("s001", 2), ("s002", 1)])
    assert first == {**dict.fromkeys(HISTORY_KEYS, 0.0), "dynamic/groups_first": 3, "dynamic/informative_first": 1}
    # s000 taught and teaches again; s001 (zero variance) now teaches; s002 (same finds) still does
    # not; s003 is new and teaches nothing.
    second = pool.observe(1, [("s000", 0), ("s001", 0), ("s002", 1), ("s003", 2)])
    assert second == {
        "dynamic/groups_first": 1,
        "dynamic/informative_first": 0,
        "dynamic/groups_after_informative": 1,
        "dynamic/informative_after_informative": 1,
        "dynamic/groups_after_uninformative": 2,
        "dynamic/informative_after_uninformative": 1,
    }
    resumed = make()
    resumed.load_state_dict(pool.state_dict())
    assert resumed.observe(2, [("s002", 0), ("s004", 0)]) == pool.observe(2, [("s002", 0), ("s004", 0)])
    assert pool.state_dict()["last_taught"] == {"s000": True, "s001": True, "s002": True, "s003": False, "s004": True}


def test_refreshed_states_are_mixed_in_by_the_same_weights():
    pool = InformativePool(states(10), 2, seed=0, mix=1.0, weight=0.1, retry=5)
    fresh = [SearchState(f"r{i}", f"q{i}", "?", (), 2, RoundState(), ()) for i in range(4)]
    pool.set_refreshed(fresh, 5)
    assert all(s.state_id.startswith("r") for s in pool.states_for_step(6)[1])
    assert all(s.state_id.startswith("r") for s in pool.refill(6, 1, 3, set()))


@pytest.mark.parametrize("bad", [{"missed_at": {"s000": "soon"}}, {"missed_at": [1, 2]}, {"missed_at": {"s": True}}])
def test_a_broken_memory_is_refused(bad):
    with pytest.raises(ValueError, match="missed_at"):
        InformativePool(states(4), 2, seed=0).load_state_dict(bad)


@pytest.mark.parametrize("pool_class", [StatePool, InformativePool])
@pytest.mark.parametrize("bad", [{"last_taught": {"s000": 1}}, {"last_taught": ["s000"]}])
def test_a_broken_history_is_refused(pool_class, bad):
    with pytest.raises(ValueError, match="last_taught"):
        pool_class(states(4), 2, seed=0).load_state_dict(bad)
