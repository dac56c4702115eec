"""Scaling policies and chunk-move planning: pure decision code, no cluster."""

import math
import sys

import pytest

from daskelastic.placement import plan_moves, predicted_round_time, workers_to_release
from daskelastic.scaling import (
    ConvergenceScalingPolicy,
    FixedScaling,
    ScalingPolicy,
    ScalingRecord,
    ThroughputTracker,
    make_scaling_policy,
)


def _feed(policy, rates, n_workers=4, seconds=1.0, start=0, t0=0.0, log_gap=0.0):
    """Observe one round per entry of ``rates`` (fall of log gap per round)."""
    decisions = []
    t = t0
    for i, fall in enumerate(rates):
        policy.observe(ScalingRecord(start + i, t, math.exp(log_gap), n_workers))
        decisions.append(policy.target(n_workers))
        log_gap -= fall
        t += seconds
    return decisions, t, log_gap


def test_policy_module_does_not_import_dask():
    import daskelastic.scaling  # noqa: F401

    assert "daskelastic.scaling" in sys.modules
    source = open(sys.modules["daskelastic.scaling"].__file__).read()
    assert "import dask" not in source and "distributed" not in source.split('"""')[2]


def test_steady_convergence_keeps_the_workers():
    policy = ConvergenceScalingPolicy(window=4, warmup=0)
    decisions, _, _ = _feed(policy, [0.5] * 30)
    assert all(d.target == 4 for d in decisions)


def test_deteriorated_rate_scales_in_by_the_factor():
    policy = ConvergenceScalingPolicy(window=4, wait_count=2, factor=0.5, warmup=0)
    decisions, _, _ = _feed(policy, [1.0] * 8 + [0.1] * 8)
    targets = [d.target for d in decisions]
    assert 2 in targets
    first = targets.index(2)
    assert first >= 8 and all(t == 4 for t in targets[:first])
    assert decisions[first].reason == "rate deteriorated"
    assert policy.log and policy.log[-1][1]["to"] == 2


def test_hysteresis_ignores_a_single_slow_window():
    policy = ConvergenceScalingPolicy(window=2, wait_count=3, warmup=0)
    decisions, _, _ = _feed(policy, [1.0] * 6 + [0.1] + [1.0] * 6)
    assert all(d.target == 4 for d in decisions)


def test_rate_is_per_second_not_per_round():
    slow_rounds = ConvergenceScalingPolicy(window=3, warmup=0)
    _feed(slow_rounds, [1.0] * 5, seconds=2.0)
    fast_rounds = ConvergenceScalingPolicy(window=3, warmup=0)
    _feed(fast_rounds, [1.0] * 5, seconds=0.5)
    assert slow_rounds.rate(4) == pytest.approx(0.5)
    assert fast_rounds.rate(4) == pytest.approx(2.0)


def test_never_below_min_workers():
    policy = ConvergenceScalingPolicy(min_workers=3, window=3, wait_count=1, warmup=0)
    decisions, _, _ = _feed(policy, [1.0] * 6 + [0.01] * 10)
    assert min(d.target for d in decisions) == 3
    at_min = ConvergenceScalingPolicy(min_workers=2, window=3, wait_count=1, warmup=0)
    decisions, _, _ = _feed(at_min, [1.0] * 6 + [0.01] * 10, n_workers=2)
    assert all(d.target == 2 for d in decisions)


def test_a_new_worker_count_needs_a_fresh_window():
    policy = ConvergenceScalingPolicy(window=4, wait_count=1, warmup=0)
    decisions, t, g = _feed(policy, [1.0] * 6 + [0.1] * 6)
    assert any(d.target == 2 for d in decisions)
    after, _, _ = _feed(policy, [0.1] * 3, n_workers=2, start=12, t0=t, log_gap=g)
    assert [d.reason for d in after] == ["warm-up"] * 3
    assert policy.rate(2) is None


def test_warmup_rounds_are_not_measured():
    policy = ConvergenceScalingPolicy(window=3, warmup=5)
    decisions, _, _ = _feed(policy, [1.0] * 7)
    assert [d.reason for d in decisions[:7]].count("warm-up") == 7


def test_fixed_scaling_and_factory():
    assert FixedScaling().target(5).target == 5
    assert make_scaling_policy(None).name == "fixed"
    custom = ConvergenceScalingPolicy(window=7)
    made = make_scaling_policy(custom)
    assert made is not custom and made.window == 7 and made.min_workers == 1
    with pytest.raises(ValueError, match="scaling_policy"):
        make_scaling_policy("sometimes")
    with pytest.raises(ValueError, match="min_workers"):
        ScalingPolicy(min_workers=0)
    with pytest.raises(ValueError, match="threshold"):
        ConvergenceScalingPolicy(threshold=1.5)


def test_throughput_is_the_median_of_recent_rounds():
    t = ThroughputTracker(window=3)
    for seconds in (1.0, 2.0, 1.0, 1.0):
        t.observe({"a": (100, seconds), "b": (100, 2 * seconds), "idle": (0, 0.0)})
    assert t.speeds(["a", "b"]) == {"a": 100.0, "b": 50.0}
    assert t.n_measured("a") == 3 and t.n_measured("idle") == 0
    t.forget(["b"])
    assert t.speeds(["a", "b"])["b"] == 100.0


def test_release_slowest_then_least_data():
    speeds = {"a": 2.0, "b": 1.0, "c": 1.0, "d": 3.0}
    rows = {"a": 100, "b": 100, "c": 50, "d": 100}
    assert workers_to_release(1, speeds, rows) == ["c"]
    assert workers_to_release(3, speeds, rows) == ["c", "b", "a"]


def test_plan_moves_evacuates_released_workers_in_proportion_to_speed():
    placement = {"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7, 8], "d": [9, 10, 11]}
    sizes = dict.fromkeys(range(12), 10)
    new, moves = plan_moves(placement, sizes, {"a": 1.0, "b": 2.0})
    assert sorted(c for cids in new.values() for c in cids) == list(range(12))
    assert len(new["a"]) == 4 and len(new["b"]) == 8
    assert {src for _, src, _ in moves} <= {"a", "c", "d"}
    assert all(dst in ("a", "b") for _, _, dst in moves)


def test_plan_moves_leaves_a_balanced_placement_alone():
    placement = {"a": [0, 1], "b": [2, 3]}
    new, moves = plan_moves(placement, dict.fromkeys(range(4), 10), {"a": 1.0, "b": 1.0})
    assert moves == [] and new == placement


def test_plan_moves_gives_a_joining_worker_its_share():
    placement = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}
    sizes = dict.fromkeys(range(8), 10)
    speeds = {"a": 1.0, "b": 1.0, "new": 1.0}
    new, moves = plan_moves(placement, sizes, speeds, keep=["a", "b", "new"])
    assert len(new["new"]) in (2, 3) and all(dst == "new" for _, _, dst in moves)
    before = predicted_round_time(placement, sizes, speeds)
    assert predicted_round_time(new, sizes, speeds) < before


def test_estimators_validate_the_elastic_parameters():
    import numpy as np
    from sklearn.utils._param_validation import InvalidParameterError

    import daskelastic as de

    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(InvalidParameterError, match="scaling_policy"):
        de.LogisticRegression(
            penalize_intercept=True, scaling_policy="sometimes", backend="inprocess").fit(X, y)
    with pytest.raises(ValueError, match="release_workers"):
        de.ConvergenceScalingPolicy(release_workers="later")
    with pytest.raises(ValueError, match=r"needs workers to release: backend='dask'"):
        de.LinearSVC(scaling_policy="convergence", backend="inprocess").fit(X, y)
    fitted = de.LogisticRegression(penalize_intercept=True, backend="inprocess").fit(X, y)
    assert all(e["events"] == [] for e in fitted.history_)


def test_a_scale_in_that_helped_is_followed_by_another():
    policy = ConvergenceScalingPolicy(window=3, wait_count=1, warmup=0, improvement=1.5)
    decisions, t, g = _feed(policy, [1.0] * 5 + [0.1] * 4)
    assert decisions[-1].target == 2 or any(d.target == 2 for d in decisions)
    # on 2 workers log(gap) falls three times faster per second than the best on 4
    after, _, _ = _feed(policy, [3.0] * 4, n_workers=2, start=9, t0=t, log_gap=g)
    reasons = [d.reason for d in after]
    assert reasons[:2] == ["warm-up", "warm-up"]
    assert after[2].reason == "scale-in helped" and after[2].target == 1


def test_a_scale_in_that_did_not_help_waits_for_a_deterioration():
    policy = ConvergenceScalingPolicy(window=3, wait_count=1, warmup=0, improvement=1.5)
    decisions, t, g = _feed(policy, [1.0] * 5 + [0.1] * 4)
    after, _, _ = _feed(policy, [1.0] * 6, n_workers=2, start=9, t0=t, log_gap=g)
    assert all(d.target == 2 for d in after)


def _shared(policy, shares, n_workers=4, start=0, fall=0.1, seconds=0.1):
    """Observe one round per entry of ``shares`` (each worker's share of a core)."""
    decisions = []
    for i, share in enumerate(shares):
        r = start + i
        policy.observe(ScalingRecord(r, seconds * (r + 1), math.exp(-fall * r), n_workers,
                                     core_share=share))
        decisions.append(policy.target(n_workers))
    return decisions


def test_workers_sharing_cores_scale_in_to_the_cores_they_get():
    """Four workers at half a core each compute like two: scale in to two at once."""
    policy = ConvergenceScalingPolicy()
    decisions = _shared(policy, [0.5, 0.52, 0.49])
    # round 0 (kernel loading) does not count; two shared rounds after it do
    assert [d.target for d in decisions] == [4, 4, 2]
    assert decisions[-1].reason == "workers share cores"
    assert decisions[-1].estimate["cores"] == 2
    # the rate over the rounds so far is the best on 4 workers
    assert decisions[-1].estimate["best_rate"] == pytest.approx(1.0)
    # three workers on two cores: two
    assert _shared(ConvergenceScalingPolicy(), [0.7, 0.66, 0.68], n_workers=3)[-1].target == 2
    # eight workers at a quarter core each: two
    assert _shared(ConvergenceScalingPolicy(), [0.25] * 3, n_workers=8)[-1].target == 2


def test_workers_with_their_own_cores_are_not_scaled_in_for_contention():
    assert all(d.target == 4 for d in _shared(ConvergenceScalingPolicy(), [0.97] * 12))
    # unmeasured (the simulated cluster), or switched off
    assert all(d.target == 4 for d in _shared(ConvergenceScalingPolicy(), [None] * 12))
    off = ConvergenceScalingPolicy(contention=None)
    assert all(d.target == 4 for d in _shared(off, [0.5] * 12))
    # one round with a core each breaks a run of shared rounds
    mixed = _shared(ConvergenceScalingPolicy(), [0.5, 0.5, 0.95, 0.5, 0.5])
    assert [d.target for d in mixed] == [4, 4, 4, 4, 2]
    # never below min_workers, and the share must stay shared for the rounds asked
    assert _shared(ConvergenceScalingPolicy(min_workers=3), [0.5] * 3)[-1].target == 3
    patient = ConvergenceScalingPolicy(contention_rounds=4)
    assert [d.target for d in _shared(patient, [0.5] * 5)] == [4, 4, 4, 4, 2]
    with pytest.raises(ValueError, match="contention"):
        ConvergenceScalingPolicy(contention=1.0)
    with pytest.raises(ValueError, match="contention_rounds"):
        ConvergenceScalingPolicy(contention_rounds=0)


def test_a_clear_gain_after_a_contention_scale_in_scales_in_again():
    """The rate on the shared cores is the bar the fewer workers must clear."""
    policy = ConvergenceScalingPolicy(window=3, warmup=0)
    assert _shared(policy, [0.5] * 3, fall=0.1)[-1].target == 2
    # on two workers with a core each, log(gap) falls 3x faster per second
    after = _shared(policy, [0.98] * 3, n_workers=2, start=3, fall=0.3)
    assert [d.reason for d in after] == ["warm-up", "warm-up", "scale-in helped"]
    assert after[-1].target == 1
    # no clear gain: stay
    policy = ConvergenceScalingPolicy(window=3, warmup=0)
    _shared(policy, [0.5] * 3, fall=0.1)
    after = _shared(policy, [0.98] * 6, n_workers=2, start=3, fall=0.12)
    assert all(d.target == 2 for d in after)


def test_a_worsening_rate_never_counts_as_a_scale_in_that_helped():
    """The rough rate on the shared cores can be negative (the gap rose): not a free pass."""
    policy = ConvergenceScalingPolicy(window=3, warmup=0)
    for r, gap in enumerate([1.0, 1.1, 1.3]):
        policy.observe(ScalingRecord(r, 0.1 * (r + 1), gap, 4, core_share=0.5))
    decision = policy.target(4)
    assert decision.target == 2 and decision.estimate["best_rate"] < 0
    # on 2 workers the gap keeps rising: that is no scale-in that helped
    for r in range(3, 12):
        policy.observe(ScalingRecord(r, 0.1 * (r + 1), 1.3 * 1.01 ** (r - 2), 2,
                                     core_share=0.97))
        assert policy.target(2).reason != "scale-in helped"
    # but progress where there was none is a scale-in that helped
    policy = ConvergenceScalingPolicy(window=3, warmup=0)
    for r, gap in enumerate([1.0, 1.1, 1.3]):
        policy.observe(ScalingRecord(r, 0.1 * (r + 1), gap, 4, core_share=0.5))
    policy.target(4)
    after = _shared(policy, [0.97] * 3, n_workers=2, start=3, fall=0.3)
    assert after[-1].reason == "scale-in helped" and after[-1].target == 1


def test_cores_taken_by_something_else_do_not_scale_in_again_and_again():
    """A share that stays low after a scale-in is not contention among the fit's workers.

    CPU quotas, other jobs or a hypervisor's steal time hold each worker to
    half a core whatever their number: one scale-in, then the rates decide.
    """
    policy = ConvergenceScalingPolicy(window=3, warmup=0, threshold=0.1)
    first = _shared(policy, [0.5] * 3, n_workers=8)
    assert first[-1].target == 4
    after = _shared(policy, [0.5] * 8, n_workers=4, start=3)
    assert all(d.target == 4 for d in after)
    # eight workers on two cores shared unevenly at first: the freed cores
    # raise the share of the three left, so the rule applies again
    policy = ConvergenceScalingPolicy(window=3, warmup=0, threshold=0.1)
    assert _shared(policy, [0.4] * 3, n_workers=8)[-1].target == 3
    again = _shared(policy, [0.67] * 2, n_workers=3, start=3)
    assert again[-1].target == 2 and again[-1].reason == "workers share cores"


def test_a_share_that_rounds_to_every_worker_is_no_contention():
    """Two workers at 0.78 of a core each still use two cores' worth: keep both."""
    assert all(d.target == 2 for d in _shared(ConvergenceScalingPolicy(), [0.78] * 6,
                                              n_workers=2))
    # halves round up: five workers at half a core each are 2.5 cores' worth
    assert _shared(ConvergenceScalingPolicy(), [0.5] * 3, n_workers=5)[-1].target == 3


def test_auto_never_fits_an_elastic_fit_in_this_process():
    # the user guide's scale-in example, run without a client on small input:
    # "auto" used to pick this process and then refuse the scaling policy
    from daskelastic.session import fit_session

    with fit_session(backend="auto", n_values=100) as (kind, client):
        assert (kind, client) == ("inprocess", None)
    with fit_session(backend="auto", n_values=100, n_workers=1, elastic=True) as (kind, client):
        assert kind == "dask"
        assert len(client.scheduler_info()["workers"]) == 1



def test_a_small_elastic_fit_without_a_client_runs_on_an_embedded_cluster(capsys):
    # the estimator passes its scaling_policy on: this fit raised "needs an
    # elastic backend" before, having been sent to this process
    import numpy as np

    import daskelastic as de

    X = np.random.default_rng(0).normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = de.LogisticRegression(
        penalize_intercept=True, scaling_policy="convergence", n_workers=1, verbose=1).fit(X, y)
    assert clf.duality_gap_ <= clf.tol
    out = capsys.readouterr().out
    assert "LocalCluster of 1 worker started for this fit (a scaling_policy)" in out
    assert "backend='inprocess'" not in out       # which would refuse the policy
