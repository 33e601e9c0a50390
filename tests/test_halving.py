"""Energy-budgeted successive halving (allocation: halving): the rounds a ladder plans, how a round ranks its
candidates at equal energy and keeps ties within the noise, what it counts as spent and when it stops."""

import copy
import math

import numpy as np
import pytest
import yaml
from tokenwatt.analysis.halving import Cooled, loss_at, next_step, rank_round, round_decision
from tokenwatt.plan import allocation
from tokenwatt.plan.allocation import RoundSettings
from tokenwatt.plan.config import load_schema, validate_config
from tokenwatt.plan.design import Design
from workflow_helpers import ROOT, config_error

SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
DEFAULT = yaml.safe_load((ROOT / "config/config.yaml").read_text())
LADDER = {
    "study": {"budgets": [10000, 20000, 40000], "trials": 3},
    "train": {"schedule": {"kind": "wsd", "branch_every": 5000}},
    "design": {"lr": [0.001, 0.003, 0.01, 0.03]},
    "allocation": {"method": "halving", "energy_j": 5000.0},
}


def _config(**changes):
    cfg = copy.deepcopy(DEFAULT)
    for section, value in {**LADDER, **changes}.items():
        cfg[section] = {**cfg.get(section, {}), **value} if isinstance(value, dict) else value
    cfg["train"] = {**DEFAULT["train"], **LADDER["train"], **changes.get("train", {})}
    return cfg


def _design(**changes) -> Design:
    return Design(validate_config(_config(**changes), SCHEMA))


def _round(losses: dict[str, list[float]], energy: float = 400.0, round_: int = 0) -> list[Cooled]:
    """Cooled points of one round: each candidate's losses by trial id, each at about ``energy``."""
    return [
        Cooled(c, t, round_, energy * (1 + 0.01 * t), loss)
        for c, values in losses.items()
        for t, loss in enumerate(values, 1)
    ]


# --- the plan
def test_every_candidate_is_a_stable_runs_levels_and_round_k_trains_the_kth_budget():
    d = _design()
    assert allocation.candidates(d) == ["lr=0.001", "lr=0.003", "lr=0.01", "lr=0.03"]
    assert allocation.round_trials(d, ["lr=0.01"], 1) == [("lr=0.01/b20000", t) for t in (1, 2, 3)]


def test_a_candidates_rounds_train_exactly_its_trial_ids_tokens_in_the_full_grid():
    # the stable run's stretches once, each budget's cooldown once: what the full grid trains in jobs of its own
    d = _design()
    trained = d.trained_tokens()
    for c in allocation.candidates(d):
        assert sum(allocation.new_tokens(d, c, k) for k in range(3)) == sum(
            trained[allocation.cell_id(d, c, k)] for k in range(3)
        )


@pytest.mark.parametrize(("entering", "keep", "kept"), [(4, 0.5, 2), (5, 0.5, 3), (9, 1 / 3, 3), (1, 0.5, 1)])
def test_a_round_keeps_its_share_rounded_up_and_at_least_one(entering, keep, kept):
    assert allocation.kept_count(entering, keep) == kept


def test_the_plan_refuses_a_study_whose_first_round_alone_exceeds_the_budget():
    d = _design()
    halving = allocation.allocation_of(validate_config(_config(), SCHEMA))
    tokens = allocation.planned_rounds(d, halving)[0].tokens
    lines, why = allocation.plan_lines(d, halving, 6000.0 / tokens, "a pilot")
    assert "allocation.energy_j" in why and "6,000 J" in why and "5,000 J" in why
    lines, why = allocation.plan_lines(d, halving, 4000.0 / tokens, "a pilot")
    assert why is None and "round 0: 4 candidates, 12 trials" in "\n".join(lines)
    assert "round 1: at least 2 candidates" in "\n".join(lines)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"train": {"schedule": {"kind": "cosine", "branch_every": None}}}, "train.schedule.branch_every"),
        ({"study": {"budgets": [10000, 20000], "trials": 1}}, "study.trials is 1"),
        ({"allocation": {"method": "halving", "energy_j": 10.0, "device_hours": 1.0}}, "exactly one of"),
        ({"allocation": {"method": "halving"}}, "exactly one of"),
        ({"design": {}}, "two levels or more"),
    ],
)
def test_a_halving_study_without_what_it_needs_is_refused_naming_the_key(changes, said):
    assert said in config_error(SCHEMA, _config(**changes))


# --- one round's decision
def test_a_trials_loss_is_read_at_the_common_energy_on_its_own_points_in_log_energy():
    points = [Cooled("a", 1, 0, 100.0, 4.0), Cooled("a", 1, 1, 400.0, 3.0)]
    assert loss_at(points, 200.0) == (pytest.approx(3.5), 1.0)
    # below its first point: read there, never extrapolated, and how far off it is said
    assert loss_at(points, 50.0) == (4.0, 2.0)


def test_a_candidate_clearly_worse_than_the_last_kept_is_dropped_and_one_within_the_noise_kept():
    # multiplicative trial-id effects shared by every candidate (the same tokens in the same order)
    trial = np.exp([0.02, -0.015, 0.005])
    losses = {
        "best": list(3.20 * trial),
        "second": list(3.25 * trial * np.exp([0.003, -0.002, 0.001])),
        "tied": list(3.25 * trial * np.exp([0.02, -0.03, 0.015])),  # within the noise of "second"
        "poor": list(3.60 * trial * np.exp([0.004, -0.003, 0.002])),  # 0.35 nats worse, every trial id
    }
    decided = rank_round(_round(losses), list(losses), 0, 0.5, 0.95)
    assert decided["kept"] == ["best", "second", "tied"] and decided["dropped"] == ["poor"]
    poor = next(r for r in decided["candidates"] if r["candidate"] == "poor")
    assert poor["evidence"]["against"] == "second" and poor["evidence"]["lower_bound"] > 0


def test_candidates_are_compared_at_the_least_of_their_median_energies():
    # "big" reached its point with twice the joules: at the common energy its loss is read between its points
    points = [
        *_round({"small": [3.4, 3.41, 3.39]}, energy=100.0, round_=1),
        *_round({"small": [3.6, 3.61, 3.59]}, energy=50.0, round_=0),
        *_round({"big": [3.0, 3.01, 2.99]}, energy=200.0, round_=1),
        *_round({"big": [3.8, 3.81, 3.79]}, energy=100.0, round_=0),
    ]
    decided = rank_round(points, ["small", "big"], 1, 0.5, 0.95)
    assert decided["common_energy_j"] == pytest.approx(102.0)  # small's median of 101, 102, 103 J
    big = next(r for r in decided["candidates"] if r["candidate"] == "big")
    assert big["mean_loss"] == pytest.approx(3.8, abs=0.01) and decided["kept"][0] == "small"


def test_a_candidate_with_a_diverged_trial_ranks_last_and_is_dropped():
    points = _round({"a": [3.2, 3.21, 3.19], "b": [3.3, 3.31, 3.29], "c": [3.25, 3.26, 3.24]})
    points[-1] = Cooled("c", 3, 0, 400.0, None)
    decided = rank_round(points, ["a", "b", "c"], 0, 0.5, 0.95)
    assert decided["dropped"] == ["c"] and "diverged" in decided["candidates"][-1]["evidence"]


def test_equal_candidates_are_seldom_dropped():
    # the size of the rule: every candidate equally good, 7 candidates, 3 trial ids, keep a half
    rng = np.random.default_rng(3)
    dropped = 0
    for _ in range(300):
        trial = rng.normal(0, 0.02, 3)
        losses = {f"c{i}": list(3.2 * np.exp(trial + rng.normal(0, 0.01, 3))) for i in range(7)}
        dropped += bool(rank_round(_round(losses), list(losses), 0, 0.5, 0.95)["dropped"])
    assert dropped / 300 < 0.1


# --- the budget
def test_the_next_round_starts_only_where_it_fits_the_budget():
    assert next_step(0, 3, 3000.0, 5000.0, 1500.0)[0] == "continue"
    assert next_step(0, 3, 3000.0, 5000.0, 2500.0)[0] == "stop"
    assert next_step(0, 3, None, 5000.0, 10.0)[0] == "stop"
    assert next_step(2, 3, 9999.0, 5000.0, None)[0] == "final"


def _record(lr: float, budget: int, trial: int, loss: float, own_j: float, stable_j: float, point: int) -> dict:
    """A branched trial's metrics.json, as much of it as a round reads."""
    return {
        "levels": {"lr": f"{lr:g}"},
        "cell": f"lr={lr:g}/b{budget}",
        "budget": budget,
        "trial": trial,
        "status": "ok",
        "eval_loss": loss,
        "energy_j": own_j + stable_j,
        "train_s": 1.0,
        "run_s": 2.0,
        "real_tokens": budget,
        "eval_energy_j": 1.0,
        "checkpoint_energy_j": 0.0,
        "lost_energy_j": 0.0,
        "branch": {
            "from_point": point,
            "from_real_tokens": point * 5000,
            "stable_energy_j": stable_j,
            "stable_train_s": 0.5,
            "stable_run_s": 1.0,
        },
    }


def test_a_rounds_spend_counts_each_stable_run_once_and_its_estimate_stops_the_study():
    records = [
        _record(lr, 10000, t, loss + 0.001 * t, own_j=20.0, stable_j=80.0, point=1)
        for lr, loss in ((0.001, 3.5), (0.003, 3.3))
        for t in (1, 2, 3)
    ]
    stretches = [
        {"series": f"lr={lr:g}", "trial": t, "point": 1, "energy_j": 80.0, "train_s": 0.5, "run_s": 1.0,
         "checkpoint_energy_j": 0.0, "lost_energy_j": 0.0}
        for lr in (0.001, 0.003)
        for t in (1, 2, 3)
    ]  # fmt: skip
    settings = RoundSettings(0, [10000, 20000], 3, 0.5, "energy_j", 700.0, 0.95, {"lr=0.001": 10000, "lr=0.003": 10000})
    decided = round_decision(records, stretches, ["lr=0.001", "lr=0.003"], None, settings)
    # 6 trials × (20 J own + 1 J eval) + 6 stable runs × 80 J, each once
    assert decided["spent"] == pytest.approx(6 * 21 + 6 * 80)
    # a trial an earlier setting trained (a candidate the rounds no longer run): not ranked, but spent
    beside = (
        [_record(0.01, 10000, 1, 3.2, own_j=20.0, stable_j=80.0, point=1)],
        [stretches[0] | {"series": "lr=0.01"}],
    )
    again = round_decision(records, stretches, ["lr=0.001", "lr=0.003"], None, settings, beside)
    assert again["spent"] == pytest.approx(decided["spent"] + 21 + 80) and again["kept"] == decided["kept"]
    assert decided["kept"] == ["lr=0.003"] and decided["next"] == "stop"
    # the survivor's 10 000 new tokens per trial id at its 0.01 J/token, × the spend over training (606 / 600)
    assert decided["next_estimate"] == pytest.approx(3 * 10000 * 0.01 * 606 / 600)
    assert math.isclose(decided["limit"], 700.0) and decided["next_candidates"] == []


def test_verdicts_follow_the_ranking_a_candidate_above_one_a_test_kept_is_kept_too():
    # "above" spent as little as "best" and is tested against it alone (0.20 nats worse: dropped by its test); "below",
    # ranked under it, spent as much as "second" and is within the noise of it: kept, and so "above" is kept too
    points = [
        *_round({"best": [3.20, 3.24, 3.16], "above": [3.40, 3.44, 3.36]}, energy=400.0),
        *_round({"second": [3.38, 3.33, 3.43], "below": [3.42, 3.37, 3.47]}, energy=600.0),
    ]
    decided = rank_round(points, ["best", "second", "above", "below"], 0, 0.5, 0.95)
    rows = {r["candidate"]: r for r in decided["candidates"]}
    assert rows["below"]["verdict"] == "kept" and rows["below"]["evidence"]["against"] == "second"
    assert rows["above"]["evidence"]["against"] == "best" and rows["above"]["evidence"]["lower_bound"] > 0
    assert rows["above"]["verdict"] == "kept" and rows["above"]["evidence"]["kept_above"] == "below"


def test_a_keep_no_test_made_does_not_keep_the_candidates_above_it():
    # "cheap" spent a third less than every candidate of the share: kept untested; "steady", above it, is dropped
    trial = np.exp([0.01, -0.01, 0.0])
    points = [
        *_round(
            {
                "best": list(3.20 * trial),
                "second": list(3.22 * trial * np.exp([0.002, -0.001, 0.0])),
                "steady": list(3.40 * trial * np.exp([0.001, -0.002, 0.001])),
            },
            energy=600.0,
        ),
        *_round({"cheap": list(3.60 * trial * np.exp([-0.001, 0.002, 0.0]))}, energy=400.0),
    ]
    decided = rank_round(points, ["best", "second", "steady", "cheap"], 0, 0.5, 0.95)
    assert decided["kept"] == ["best", "second", "cheap"] and decided["dropped"] == ["steady"]


def test_a_diverged_candidate_is_never_kept_even_inside_the_share_and_none_is_when_all_diverged():
    points = _round({"a": [3.2, 3.21, 3.19], "b": [3.3, 3.31, 3.29]})
    points[-1] = Cooled("b", 3, 0, 400.0, None)
    assert rank_round(points, ["a", "b"], 0, 0.9, 0.95)["kept"] == ["a"]
    points[0] = Cooled("a", 1, 0, 400.0, None)
    assert rank_round(points, ["a", "b"], 0, 0.9, 0.95)["kept"] == []


def test_a_round_whose_every_trial_diverged_keeps_none_and_stops_the_study():
    records = [
        {**_record(0.001, 10000, t, 3.5, own_j=20.0, stable_j=80.0, point=1), "status": "diverged", "eval_loss": None}
        for t in (1, 2, 3)
    ]
    settings = RoundSettings(0, [10000, 20000], 3, 0.5, "energy_j", 1e9, 0.95, {"lr=0.001": 10000})
    decided = round_decision(records, [], ["lr=0.001"], None, settings)
    assert decided["kept"] == [] and decided["next"] == "stop" and "diverged" in decided["why"]


def test_the_trials_known_so_far_are_round_0s_and_each_later_rounds_survivors():
    d = _design()
    records = {0: {"next": "continue", "next_candidates": ["lr=0.003", "lr=0.01"]}, 1: {"next": "stop"}}
    known = allocation.walk(d, records.get).trials
    assert len(known) == 4 * 3 + 2 * 3 and ("lr=0.01/b20000", 3) in known and ("lr=0.001/b20000", 1) not in known
    # before round 0's checkpoint has run: round 0 alone
    assert allocation.walk(d, records.get).rounds == 2
    assert allocation.walk(d, lambda k: None).trials == allocation.round_trials(d, allocation.candidates(d), 0)
    # rounds 0 and 1 alone, reading round 0's record only (a round's checkpoint asks for the rounds before it)
    assert allocation.walk(d, lambda k: records[k] if k < 1 else 1 / 0, through=1).trials == known


def test_a_first_round_never_drops_a_candidate_against_one_that_spent_far_more_energy():
    # round 0 has no earlier point: "big" is read at its own 1.5 × the energy, and its lower loss may be those joules
    trial = np.exp([0.01, -0.01, 0.0])
    points = [
        *_round({"big": list(3.2 * trial), "mid": list(3.25 * trial)}, energy=600.0),
        *_round({"small": list(3.6 * trial * np.exp([0.001, -0.001, 0.0]))}, energy=400.0),
    ]
    decided = rank_round(points, ["big", "mid", "small"], 0, 0.5, 0.95)
    small = next(r for r in decided["candidates"] if r["candidate"] == "small")
    assert small["verdict"] == "kept" and "not compared at equal energy" in small["evidence"]
    assert small["read_at_ratio"] == pytest.approx(1.0, abs=0.02) and decided["common_energy_j"] == pytest.approx(408.0)
