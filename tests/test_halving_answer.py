"""A halving study's answer (the allocation product) and its report section: the choice with its interval, the spend
against the budget counted over every trial on disk, the full grid's choice at the same energy, and a section that
says what happened whatever the outcome (no round yet, every candidate diverged)."""

import types

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.halving import Cooled, rank_round, round_decision
from tokenwatt.analysis.halving_answer import allocation_product
from tokenwatt.plan.allocation import RoundSettings
from tokenwatt.presentation.sections import allocation as section

SETTINGS = {"method": "halving", "energy_j": 1000.0, "keep": 0.5, "confidence": 0.95, "full_grid": None}
TRIAL = np.exp([0.01, -0.012, 0.004])  # trial-id effects every candidate shares


def _record(lr: float, budget: int, trial: int, loss: float | None, joules: float) -> dict:
    return {
        "levels": {"lr": f"{lr:g}"},
        "cell": f"lr={lr:g}/b{budget}",
        "budget": budget,
        "trial": trial,
        "status": "ok" if loss is not None else "diverged",
        "eval_loss": loss,
        "energy_j": joules,
        "train_s": joules / 30.0,
        "run_s": joules / 25.0,
        "real_tokens": budget,
        "eval_energy_j": 0.05 * joules,
        "checkpoint_energy_j": 0.0,
        "lost_energy_j": 0.0,
    }


def _study(losses: dict[float, float], budget: int = 1000) -> list[dict]:
    """One round's trial records at a CPU study's scale: losses in nats, ~0.3 J per 1 000 tokens, unequal spreads."""
    return [
        _record(lr, budget, t, loss * TRIAL[t - 1] * (1 + 0.002 * t * i), 300.0 * (1 + 0.01 * t))
        for i, (lr, loss) in enumerate(losses.items())
        for t in (1, 2, 3)
    ]


def _round(records: list[dict], entering: list[str], limit: float = 1000.0) -> dict:
    settings = RoundSettings(0, [1000], 3, 0.5, "energy_j", limit, 0.95, None)
    return round_decision(records, [], entering, None, settings)


def _render(data: dict) -> str:
    inputs = types.SimpleNamespace(product=lambda name: data, estimated=True)
    return str(section.render(inputs))


def test_the_answer_is_the_best_kept_candidate_with_a_t_interval_over_trial_ids():
    records = _study({0.003: 3.20, 0.01: 3.45})
    decided = _round(records, ["lr=0.003", "lr=0.01"])
    data = allocation_product(SETTINGS, [decided], {"records": records, "stretches": []}, None).data
    losses = [r["eval_loss"] for r in records if r["levels"]["lr"] == "0.003"]
    assert data["chosen"]["candidate"] == "lr=0.003" and data["chosen"]["loss"] == pytest.approx(np.mean(losses))
    assert data["chosen"]["low"] < data["chosen"]["loss"] < data["chosen"]["high"] and data["chosen"]["trial_ids"] == 3
    assert data["spent"] == pytest.approx(6 * 300.0 * 1.02 * 1.05) and data["within_budget"] is False
    assert "Chosen by successive halving: lr=0.003" in _render(data) and "over the" in _render(data)


def test_trials_on_disk_beyond_the_rounds_count_in_the_spend():
    # a round trained under a larger budget, no longer asked for: its joules were spent all the same
    records = _study({0.003: 3.20, 0.01: 3.45})
    decided = _round(records, ["lr=0.003", "lr=0.01"], limit=1e6)
    later = [_record(0.003, 2000, t, 3.0, 700.0) for t in (1, 2, 3)]
    data = allocation_product(SETTINGS, [decided], {"records": records + later, "stretches": []}, None).data
    assert data["spent_beyond_rounds"] == pytest.approx(3 * 700.0 * 1.05)
    assert data["spent"] == pytest.approx(data["spent_by_rounds"] + data["spent_beyond_rounds"])
    assert "that the rounds no longer ask for" in _render(data)


def test_a_last_round_whose_every_candidate_diverged_chooses_none_and_says_why():
    records = [_record(0.003, 1000, t, None, 300.0) for t in (1, 2, 3)]
    decided = _round(records, ["lr=0.003"])
    data = allocation_product(SETTINGS, [decided], {"records": records, "stretches": []}, None).data
    assert data["chosen"] is None and "diverged" in data["stopped_why"]
    assert "No candidate was chosen" in _render(data)


def test_before_any_round_the_section_says_so():
    data = allocation_product(SETTINGS, [], {"records": [], "stretches": []}, None).data
    assert "no round has been ranked yet" in _render(data)


def _grid(losses: dict[float, list[float]], diverged: tuple = ()) -> dict:
    rows = [
        {"series": f"lr={lr:g}", "trial": t, "budget": 1000, "energy_j": 300.0 * (1 + 0.01 * t), "eval_loss": loss}
        for lr, values in losses.items()
        for t, loss in enumerate(values, 1)
    ]
    for lr, t in diverged:
        next(r for r in rows if r["series"] == f"lr={lr:g}" and r["trial"] == t)["eval_loss"] = None
    cost = {"total_energy_j": 1800.0, "eval_energy_j": 90.0, "checkpoint_energy_j": 0.0, "lost_energy_j": 0.0}
    return {"trials": pl.DataFrame(rows), "cost": cost}


def test_the_full_grid_chooses_at_the_same_energy_by_the_same_reading_and_a_diverged_candidate_is_out():
    records = _study({0.003: 3.20, 0.01: 3.45})
    decided = _round(records, ["lr=0.003", "lr=0.01"])
    settings = {**SETTINGS, "full_grid": "results-grid"}
    grid = _grid({0.003: [3.3, 3.31, 3.29], 0.01: [3.1, 3.11, 3.09]})
    full = allocation_product(settings, [decided], {"records": records, "stretches": []}, grid).data["full_grid"]
    assert full["chosen"] == "lr=0.01" and full["spent_j"] == pytest.approx(1890.0)
    page = _render(allocation_product(settings, [decided], {"records": records, "stretches": []}, grid).data)
    assert "chooses <b>lr=0.01</b>" in page and "1,890 J" in page
    grid = _grid({0.003: [3.3, 3.31, 3.29], 0.01: [3.1, 3.11, 3.09]}, diverged=[(0.01, 2)])
    full = allocation_product(settings, [decided], {"records": records, "stretches": []}, grid).data["full_grid"]
    assert full["chosen"] == "lr=0.003" and full["losses"]["lr=0.01"] == float("inf")


def test_a_full_grid_of_another_ladder_is_named_not_compared():
    records = _study({0.003: 3.20, 0.01: 3.45})
    decided = _round(records, ["lr=0.003", "lr=0.01"])
    grid = _grid({0.003: [3.3, 3.31, 3.29], 0.03: [3.1, 3.11, 3.09]})
    settings = {**SETTINGS, "full_grid": "results-grid"}
    full = allocation_product(settings, [decided], {"records": records, "stretches": []}, grid).data["full_grid"]
    assert "not the same ladder" in full["why"] and "chosen" not in full
    page = _render(allocation_product(settings, [decided], {"records": records, "stretches": []}, grid).data)
    assert "Full grid (results-grid): not the same ladder" in page


def test_a_round_compares_with_cooled_points_alone():
    # sanity of the fixture: the two candidates are told apart in one round
    points = [Cooled("a", t, 0, 300.0, 3.2 * TRIAL[t - 1]) for t in (1, 2, 3)]
    points += [Cooled("b", t, 0, 300.0, 3.45 * TRIAL[t - 1] * (1 + 0.002 * t)) for t in (1, 2, 3)]
    assert rank_round(points, ["a", "b"], 0, 0.5, 0.95)["dropped"] == ["b"]
