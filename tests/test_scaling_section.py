"""The report's Scaling section and the energy-to-target sentence: what the reader is told about the intervals."""

import re

import numpy as np
import pytest
from test_scaling_study import QUICK, _study
from tokenwatt.analysis.scaling.study import analyse_scaling
from tokenwatt.presentation.sections.curves import target_sentence
from tokenwatt.presentation.sections.scaling import energy_vs_flops_sentence, scaling_html

# One worker computes the module's fitted study once (a module fixture is per worker).
pytestmark = pytest.mark.xdist_group("test_scaling_section")


@pytest.fixture(scope="module")
def scaling():
    curves, trials = _study()
    return analyse_scaling(curves, trials, QUICK)


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", page))


def test_the_units_of_the_intervals_are_stated_beside_them(scaling):
    text = _text(scaling_html(scaling))
    assert "Units of the intervals: jackknife over 3 trial ids and 4 model sizes" in text


def test_whether_the_law_fits_is_said_before_anything_is_allocated(scaling):
    page = scaling_html(scaling)
    assert page.index("Does the law fit?") < page.index("The energy-optimal allocation on this hardware")


def test_a_law_that_does_not_fit_within_noise_is_flagged_as_a_warning(scaling):
    bad = {**scaling, "law_total": {**scaling["law_total"]}}
    bad["law_total"]["lack_of_fit"] = {
        **scaling["law_total"]["lack_of_fit"],
        "fits": False,
        "verdict": "the law does NOT fit within noise: its residuals are larger than the trials' spread allows",
    }
    assert '<p class="warn"><b>Does the law fit?</b> The law does NOT fit within noise' in scaling_html(bad)


def test_a_parameter_that_is_not_identified_is_shown_as_such_with_no_interval(scaling):
    law = {**scaling["law_total"], "intervals": dict(scaling["law_total"]["intervals"])}
    law["intervals"]["E"] = {"ci_low": None, "ci_high": None, "why": "not identified: equally good fits differ in E"}
    text = _text(scaling_html({**scaling, "law_total": law}))
    assert "not identified (" in text and "Without an interval (total N): E: not identified" in text


def test_the_energy_optimal_split_is_compared_with_the_flop_optimal_one_in_words(scaling):
    text = _text(scaling_html(scaling))
    # this study's budgets with an interval all have an optimum beyond the sizes measured: none carries a verdict
    assert "Energy-optimal against FLOP-optimal. Whether the two splits differ is not judged at any of the 9" in text
    assert "5 of 9 budgets left out of the verdict because an optimum lies beyond the measured model sizes" in text
    assert "differs from the FLOP-optimal one" not in text


def _budget(ratio, low, high, extrapolated=False, not_judged=None):
    differs = None if not_judged or low is None else bool(low > 1 or high < 1)
    return {
        "ratio_N": ratio,
        "ci_low": low,
        "ci_high": high,
        "tokens_per_parameter_energy": 10.0,
        "tokens_per_parameter_flops": 20.0,
        "differs": differs,
        "not_judged": not_judged or (None if low is not None else "no interval"),
        "extrapolated": extrapolated,
    }


def test_budgets_whose_optimum_lies_beyond_the_measured_sizes_are_left_out_of_the_verdict_and_counted():
    compare = [_budget(1.4, 1.3, 1.5, extrapolated=True), _budget(1.4, 1.2, 1.6, extrapolated=True)]
    compare.append(_budget(1.1, 0.8, 1.5))
    sentence = energy_vs_flops_sentence(compare)
    assert (
        "At the 1 of 3 budgets judged (2 of 3 budgets left out of the verdict because an optimum lies beyond"
        in sentence
    )
    assert sentence.endswith("excludes 1 at 0 of the 1: no difference shown; the interval is ×1.875 wide.")


def test_budgets_without_an_interval_are_counted_as_refusals_and_not_read():
    compare = [_budget(1.9, None, None), _budget(1.7, None, None), _budget(1.1, 0.8, 1.5)]
    sentence = energy_vs_flops_sentence(compare)
    assert "(2 of 3 budgets have no interval: not read), the energy-optimal N* is 1.100 × the FLOP-optimal" in sentence
    assert "1.900" not in sentence and "1.700" not in sentence


def test_both_forms_of_energy_per_token_and_the_choice_are_shown(scaling):
    text = _text(scaling_html(scaling))
    assert "c · N^γ" in text and "e₀ + b · N" in text and "too few for AICc" in text


def _reach(n_reached, at_first, median):
    return {
        "target": "loss 2.4",
        "series": "",
        "budget": 1000,
        "n": 5,
        "n_reached": n_reached,
        "n_at_first_point": at_first,
        "n_censored": 5 - n_reached,
        "energy_median_j": median,
        "energy_ci95_low_j": None,
        "energy_ci95_high_j": None,
    }


def test_runs_that_crossed_at_their_first_point_are_reported_as_upper_bounds_not_as_no_trial_reached():
    text = target_sentence({"energy_to_target": [_reach(5, 5, 12.0)]})
    assert "No trial reached" not in text
    assert "5 of 5 trials reached it, 5 of them at or before their first eval point (an upper bound)" in text


def test_no_trial_reached_is_said_only_when_none_did():
    assert target_sentence({"energy_to_target": [_reach(0, 0, None)]}) == "No trial reached loss 2.4."


def test_the_size_effect_and_the_tuned_learning_rates_are_shown_before_the_law(scaling):
    rates = [{"params": 60_000, "budget": 20_000, "lr": 0.03, "tried": {"0.01": 3.1, "0.03": 2.9}, "at_edge": True}]
    page = scaling_html({**scaling, "learning_rates": rates})
    text = _text(page)
    assert "Can this study see model size?" in text and "the study can see model size" in text
    assert "0.03 (edge of the sweep)" in text and "1 of 1 chose a rate at the edge of the sweep" in text
    assert page.index("Learning rate tuned") < page.index("Units of the intervals")


def test_a_size_effect_at_scaled_budgets_names_each_sizes_tokens_and_energy_and_no_fault_where_it_is_not_seen(scaling):
    scaled = {
        "budget": 370_000,
        "smallest": {"params": 26_196, "mean_final_loss": 3.90, "n": 3, "real_tokens": 1_776_000, "energy_j": 990.0},
        "largest": {"params": 399_840, "mean_final_loss": 3.89, "n": 3, "real_tokens": 370_000, "energy_j": 790.0},
        "gain": 0.01, "se": 0.02, "df": 3.9, "t": 0.5, "p": 0.64, "visible": False, "same_tokens": False,
    }  # fmt: skip
    text = _text(scaling_html({**scaling, "size_effect": scaled}))
    assert "the largest model trained 370.0 k tokens with 790 J, the smallest 1.776 M with 990 J" in text
    assert "the smaller model is as good as the larger" in text and "optimiser holds" not in text


def _pair(a, b, difference=None, low=None, high=None, why=None):
    held = None if low is None else not (low > 0 or high < 0)
    width = None if low is None else float(np.exp(high - low))
    verdict = (
        None if low is None else f"no contradiction detected (intervals ×{width:.3g} wide)" if held else "contradict"
    )
    return {
        "approaches": [a, b], "log_difference": difference, "log_low": low, "log_high": high,
        "width_factor": width, "contradict": None if low is None else not held, "verdict": verdict, "why": why,
    }  # fmt: skip


def _with_tests(scaling, pairs, left_out=None):
    """The study with these pairs' tests at every energy of its frontier."""
    front = scaling["frontier"]
    rows = [{"energy_j": j, "pairs": pairs, "left_out": left_out or {}, "why": None} for j in front["energies_j"]]
    return {**scaling, "frontier": {**front, "agreement": rows}}


def test_the_frontier_table_says_which_pairs_contradict_and_never_that_approaches_agree(scaling):
    pairs = [
        _pair("envelope", "isoenergy", 0.05, -0.2, 0.3),
        _pair("isoenergy", "law", np.log(1.4), np.log(1.2), np.log(1.6)),
        _pair("envelope", "law", why="no paired interval: refits without a value: 2 of 7 without one model size"),
    ]
    text = _text(scaling_html(_with_tests(scaling, pairs)))
    assert "lower envelope" in text and "iso-energy slices" in text and "law with e(N)" in text
    assert "envelope – slices: no contradiction detected (intervals ×1.65 wide)" in text
    assert "slices – law: contradict (N* ratio 1.400 [1.200, 1.600])" in text
    assert "envelope – law: not tested" in text
    n = len(scaling["frontier"]["energies_j"])
    assert f"the paired test envelope – law, at {n} of {n} energies: no paired interval: refits without" in text
    assert not re.search(r"\b(agree|disagree)\b", text.split("three ways", 1)[1])


def test_a_law_in_doubt_is_left_out_of_the_frontiers_paired_test_in_the_table(scaling):
    left_out = {"law": "the law is in doubt (its lack-of-fit screen rejects it): left out of the comparison"}
    text = _text(scaling_html(_with_tests(scaling, [_pair("envelope", "isoenergy", 0.05, -0.2, 0.3)], left_out)))
    assert "law with e(N) left out: in doubt" in text and "slices – law" not in text


def test_a_frontier_estimate_without_an_interval_is_greyed_not_shown_as_a_finding(scaling):
    front = scaling["frontier"]
    envelope = {**front["approaches"]["envelope"]}
    lone = {**envelope["estimates"][0], "n_opt": 8.9e4, "n_low": None, "n_high": None, "d_opt": 3e5, "loss_opt": 4.0}
    lone |= {"why": None, "beyond_sizes": False, "beyond_tokens": False}
    envelope["estimates"] = [lone, *envelope["estimates"][1:]]
    shown = {**front, "approaches": {**front["approaches"], "envelope": envelope}}
    page = scaling_html({**scaling, "frontier": shown})
    assert '<span class="no-interval">89.00 k</span> <span class="ci">(no interval)</span>' in page


def test_a_refused_frontier_estimate_is_said_with_its_reason_once(scaling):
    front = scaling["frontier"]
    first = front["approaches"]["isoenergy"]["estimates"][0]
    refused = {**first, "n_opt": None, "n_low": None, "n_high": None, "why": "the lowest loss is at the largest size"}
    isoenergy = {**front["approaches"]["isoenergy"]}
    isoenergy["estimates"] = [refused] + isoenergy["estimates"][1:]
    page = scaling_html(
        {**scaling, "frontier": {**front, "approaches": {**front["approaches"], "isoenergy": isoenergy}}}
    )
    assert _text(page).count("the lowest loss is at the largest size") == 1


def test_without_a_frontier_the_section_says_why(scaling):
    message = "2 of 90 points have no training energy"
    page = scaling_html({**scaling, "frontier": {"status": "not computed", "message": message}})
    assert message in _text(page) and "three ways" in _text(page)


def test_a_law_in_doubt_is_said_beside_the_frontier_table(scaling):
    front = {**scaling["frontier"], "approaches": {**scaling["frontier"]["approaches"]}}
    front["approaches"]["law"] = {**front["approaches"]["law"], "doubt": "its lack-of-fit screen rejects it"}
    text = _text(scaling_html({**scaling, "frontier": front}))
    assert "The law's column rests on a law in doubt: its lack-of-fit screen rejects it" in text


def test_a_frontier_computed_where_the_law_could_not_be_fitted_is_shown_with_the_laws_message(scaling):
    unfitted = {
        "status": "not fitted",
        "message": "The law cannot be fitted to these points: loss: 6 rows",
        **{k: scaling[k] for k in ("points", "model_sizes", "budgets", "frontier")},
    }
    text = _text(scaling_html(unfitted))
    assert "The law cannot be fitted to these points" in text and "The energy-optimal frontier, three ways" in text
    assert "iso-energy slices" in text


def test_the_energy_against_flop_optimal_size_off_the_slices_is_said_with_its_interval_or_why_not(scaling):
    front = scaling["frontier"]
    versus = front["energy_vs_flop"]
    text = _text(scaling_html(scaling))
    assert "Energy-optimal against FLOP-optimal, without the law." in text
    found = [e for e in versus["estimates"] if e["ratio"] is not None]
    if found:
        assert f"({len(found)} of {len(versus['estimates'])} energies)" in text
    row = {**versus["estimates"][0], "ratio": 2.5, "ratio_low": 1.5, "ratio_high": 4.0, "excludes_one": True}
    row |= {"n_energy": 2.5e5, "n_flop": 1e5, "why": None}
    shown = {**front, "energy_vs_flop": {**versus, "estimates": [row]}}
    text = _text(scaling_html({**scaling, "frontier": shown}))
    assert "N*_E 250.0 k against N*_C 100.0 k: 2.500× [1.500, 4.000], excludes 1 (1 of 1 energies with an" in text
    assert "no correction for several): 1 of 1 exclude 1 (1 with N*_E above N*_C, 0 below)." in text


def _versus_row(energy, ratio, low=None, high=None, why=None):
    excludes = None if low is None else bool(low > 1 or high < 1)
    return {
        "energy_j": energy, "compute_flop": 1e10, "n_energy": 6e4 * ratio, "n_flop": 6e4, "ratio": ratio,
        "n_flop_low": None, "n_flop_high": None, "ratio_low": low, "ratio_high": high, "excludes_one": excludes,
        "interval_why": None if low is not None else why, "why": None,
    }  # fmt: skip


def test_energies_without_an_interval_are_counted_as_refusals_and_an_interval_holding_one_is_no_finding(scaling):
    refits = "refits without a value: 2 of 7 without one model size"
    rows = [_versus_row(j, r, why=refits) for j, r in ((31.0, 1.10), (61.0, 1.16), (123.0, 1.24), (496.0, 1.43))]
    rows.insert(3, _versus_row(247.0, 1.09, 0.58, 2.06))
    front = scaling["frontier"]
    shown = {**front, "energy_vs_flop": {**front["energy_vs_flop"], "estimates": rows}}
    text = _text(scaling_html({**scaling, "frontier": shown}))
    assert "1.090× [0.5800, 2.060]: no difference shown; the interval is ×3.552 wide (1 of 5 energies with an" in text
    assert f"4 of 5 energies have no interval ({refits}): not read." in text
    assert not any(f"{r}×" in text for r in ("1.100", "1.160", "1.240", "1.430"))  # no lean read off them
