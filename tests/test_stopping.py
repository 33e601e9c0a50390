"""The energy-aware stopping rule: the training loop asks it online at each evaluation point, the analysis replays it.

Points at the scale of a small CPU trial: cumulative training energy in J (hundreds to thousands), eval loss in nats.
"""

import pytest
from tokenwatt.plan.stopping import StopRule, StopRuleError, segment_gain, should_stop, stop_rule

# Gains per segment: (5.0 − 4.0) / 0.2 kJ = 5, 0.2 / 0.4 = 0.5, 0.04 / 0.8 = 0.05, 0.01 / 1.6 = 0.00625 nats/kJ.
POINTS = [
    {"train_energy_j": e, "eval_loss": v}
    for e, v in zip([100.0, 300.0, 700.0, 1500.0, 3100.0], [5.0, 4.0, 3.8, 3.76, 3.75])
]


def _first_stop(points, rule):
    """The 1-based point after which training would stop, or None."""
    return next((k for k in range(1, len(points) + 1) if should_stop(points[:k], rule)), None)


def test_segment_gain_is_the_loss_fall_per_kj_of_training_energy():
    assert [segment_gain(a, b) for a, b in zip(POINTS, POINTS[1:])] == pytest.approx([5.0, 0.5, 0.05, 0.00625])


def test_patience_one_stops_at_the_first_segment_below_the_threshold_and_says_why():
    rule = StopRule("marginal", 0.1, 1)
    assert _first_stop(POINTS, rule) == 4  # the segment ending at point 4 gained 0.05 < 0.1
    reason = should_stop(POINTS[:4], rule)
    assert "below 0.1 nats/kJ" in reason and "last 1 segment" in reason and "1500 J" in reason


def test_patience_two_needs_two_low_segments_in_a_row():
    rule = StopRule("marginal", 0.1, 2)
    assert should_stop(POINTS[:4], rule) is None  # 0.5 then 0.05: only the last is low
    assert _first_stop(POINTS, rule) == 5  # 0.05 then 0.00625


def test_a_backslide_between_good_segments_does_not_stop_a_patient_rule():
    points = [
        {"train_energy_j": e, "eval_loss": v} for e, v in zip([100.0, 300.0, 700.0, 1500.0], [5.0, 4.0, 4.1, 3.5])
    ]
    assert _first_stop(points, StopRule("marginal", 0.1, 2)) is None
    assert _first_stop(points, StopRule("marginal", 0.1, 1)) == 3


def test_none_never_stops_even_when_the_loss_rises():
    rising = [{"train_energy_j": 100.0 * k, "eval_loss": 3.0 + 0.1 * k} for k in range(1, 10)]
    assert _first_stop(rising, stop_rule("none")) is None


def test_a_segment_the_meter_saw_no_energy_in_never_counts_as_a_low_gain():
    points = [{"train_energy_j": e, "eval_loss": v} for e, v in zip([100.0, 300.0, 300.0], [5.0, 4.0, 3.99])]
    assert segment_gain(points[1], points[2]) is None
    assert should_stop(points, StopRule("marginal", 0.1, 1)) is None


def test_the_marginal_rule_without_measured_energy_is_refused_in_a_sentence():
    points = [{"train_energy_j": None, "eval_loss": v} for v in (5.0, 4.0)]
    with pytest.raises(StopRuleError, match="needs the training energy"):
        should_stop(points, StopRule("marginal", 0.1, 1))


def test_config_forms_give_the_typed_rule_and_round_trip():
    assert stop_rule("none") == stop_rule(None) == stop_rule({"rule": "none"}) == StopRule()
    rule = stop_rule({"rule": "marginal", "min_gain_per_kj": 0.05, "patience": 2})
    assert rule == StopRule("marginal", 0.05, 2)
    assert stop_rule(rule.to_dict()) == rule and stop_rule(StopRule().to_dict()) == StopRule()


@pytest.mark.parametrize(
    "config, words",
    [
        ("marginal", "a rule is 'none' or a mapping"),
        ({"rule": "plateau"}, "one of none, marginal"),
        ({"rule": "marginal", "patience": 2}, "min_gain_per_kj must be a finite number"),
        ({"rule": "marginal", "min_gain_per_kj": -0.1}, "min_gain_per_kj must be a finite number ≥ 0"),
        ({"rule": "marginal", "min_gain_per_kj": 0.1, "patience": 0}, "patience must be a whole number ≥ 1"),
        ({"rule": "marginal", "min_gain_per_kj": 0.1, "patince": 2}, "unknown setting(s) patince"),
        ({"rule": "none", "patience": 2}, "takes no settings"),
    ],
)
def test_a_rule_that_could_not_run_as_meant_is_refused(config, words):
    with pytest.raises(StopRuleError) as e:
        stop_rule(config)
    assert words in str(e.value)
