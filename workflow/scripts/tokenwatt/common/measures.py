"""The measures the analysis reports: one place for their labels, units and how their numbers are written."""

from __future__ import annotations

import math
import sys
from typing import Any, NamedTuple

# The largest x whose exp() a float holds (exp(709.78) ≈ 1.8e308); a diverged run's loss can pass it.
LOG_MAX_FLOAT = math.log(sys.float_info.max)


def exp_of_loss(x: float | None) -> float | None:
    """exp(x) of a loss or a loss difference (nats): a perplexity or a perplexity ratio.

    None where x is None or NaN, and where exp would overflow (a diverged run's loss past ~709 nats): such a
    perplexity is not a number a table holds, so it is missing, and its loss stays in the loss columns.
    """
    if x is None or x != x or x > LOG_MAX_FLOAT:
        return None
    return math.exp(x)


class Measure(NamedTuple):
    """A measure's label and unit, and the scale it is analysed on.

    ``log``: a ratio-scale quantity whose effects multiply (PE ∝ invPPL / (params · tokens · W); energy =
    power × time), so factors that change its level change its differences in proportion. Tested on log
    values, summarised as geometric means, compared as ratios: on the raw scale two series that both halve
    per doubling of the budget would show an "interaction" that is their difference in level.
    ``raw``: additive quantities (eval loss is already a log: log perplexity), and differences that can be
    zero or negative (energy above idle).
    """

    label: str
    unit: str
    scale: str


# name -> Measure; the order is the order of tables and figures; the scale is declared here only.
MEASURES: dict[str, Measure] = {
    "pe": Measure("PE (energy-aware parameter efficiency)", "a.u.", "log"),
    "quality_per_mparam": Measure("Quality per parameter", "invPPL / M params", "log"),
    "quality_per_pflop": Measure("Quality per compute", "invPPL / PFLOP", "log"),
    "quality_per_kj": Measure("Quality per energy", "invPPL / kJ", "log"),
    "power_rms_w": Measure("RMS power", "W", "log"),
    "power_mean_w": Measure("Mean power", "W", "log"),
    "energy_j": Measure("Energy", "J", "log"),
    "dynamic_energy_j": Measure("Energy above idle", "J", "raw"),
    "joules_per_token": Measure("Energy per token", "J/token", "log"),
    "train_s": Measure("Training time", "s", "log"),
    "tokens_per_s": Measure("Throughput", "tokens/s", "log"),
    "eval_loss": Measure("Eval loss", "nats/token", "raw"),
    "perplexity": Measure("Perplexity", "", "log"),
    "inv_ppl": Measure("Quality (invPPL = 1 / perplexity)", "", "log"),
    "peak_memory_bytes": Measure("Peak memory", "B", "log"),
    "optimizer_state_bytes": Measure("Optimizer state", "B", "log"),
    "kwh": Measure("Energy at the facility (× PUE)", "kWh", "log"),
    "kg_co2e": Measure("Emissions", "kg CO2e", "log"),
    "electricity_cost": Measure("Electricity cost", "{currency}", "log"),
    "device_cost": Measure("Device-hour cost", "{currency}", "log"),
    "total_cost": Measure("Cost, electricity + device-hours", "{currency}", "log"),
    "cost_per_inv_ppl": Measure("Cost per unit of quality", "{currency} / invPPL", "log"),
    "energy_to_target_j": Measure("Training energy to reach a target quality", "J", "log"),
}


def scale_of(name: str) -> str:
    """``log`` or ``raw``: the scale every test and summary of ``name`` uses."""
    return MEASURES[name].scale


# The report's conditions tables: one per family of measures.
FAMILIES: dict[str, list[str]] = {
    "Efficiency": ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj"],
    "Power and energy": ["power_rms_w", "power_mean_w", "energy_j", "dynamic_energy_j", "joules_per_token"],
    "Time and quality": ["train_s", "tokens_per_s", "eval_loss", "perplexity", "inv_ppl"],
    "Memory": ["peak_memory_bytes", "optimizer_state_bytes"],
    "Carbon and money": ["kwh", "kg_co2e", "electricity_cost", "device_cost", "total_cost", "cost_per_inv_ppl"],
}

# A measure that is the sum of others: a table shows it only where every part is measured, since with one part
# missing (one price not set) it is the other part's row again.
SUMS: dict[str, tuple[str, ...]] = {"total_cost": ("electricity_cost", "device_cost")}

# Measures tested with the repeated-measures ANOVA (the list: PE, its layers, power, energy, time).
TESTED = ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj", "power_rms_w", "energy_j", "train_s"]

# Measures a meter makes flat by construction, by meter kind, with why: a test of one would test the meter's formula
# (or the machine's other load), not the budget, so the analysis leaves it out and the report says why once.
FLAT_BY_METER: dict[str, tuple[tuple[str, ...], str]] = {
    "estimate": (
        ("power_rms_w", "power_mean_w"),
        "under the CPU estimate (meter estimate) power is the configured TDP × this process's share of the machine's "
        "CPUs, so it says how many cores training kept busy, which no budget changes: it is flat by construction, and "
        "a difference between budgets would be the machine's other load, not the model's work. Energy (CPU time × "
        "that share) and time grow with the work and are tested; power's values stay in the tables and figures",
    ),
}


def display_exponent(values) -> int:
    """Power of ten, a multiple of 3, that brings the largest magnitude into [0.01, 10 000) for display."""
    big = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if big == 0 or 0.01 <= big < 1e4:
        return 0
    return int(math.floor(math.log10(big) / 3) * 3)


def fixed(x: Any, scale: int = 0) -> str:
    """A number in fixed notation with four significant digits after dividing by 10^scale; never "e-08"."""
    if x is None or x != x:
        return "—"
    if math.isinf(x):  # e.g. a paired t with identical differences
        return "∞" if x > 0 else "−∞"
    v = x / 10**scale
    digits = max(0, 3 - math.floor(math.log10(abs(v)))) if v else 0
    return f"{v:,.{digits}f}"


_PREFIXES = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G"}

# Units a reader takes any SI prefix on (µJ, ng); any other (a currency, a count) stops at milli: 0.09 mEUR is a
# price a reader reads, 90 µEUR is not.
PHYSICAL_UNITS = frozenset({"J", "Wh", "W", "g", "s", "FLOP", "J/token"})


def _prefix_exponent(x: float, finest: int) -> int:
    """The multiple of 3 whose SI prefix writes x with one to three digits before the point, kept to [finest, 9]."""
    if x == 0 or x != x or math.isinf(x):
        return 0
    return max(finest, min(9, int(math.floor(math.log10(abs(x)) / 3) * 3)))


def si(x: float | None, unit: str) -> str:
    """A quantity with an SI prefix and four significant digits: 0.2998 Wh -> "299.8 mWh"; a currency's stops at
    milli, 8.994e-05 EUR -> "0.08994 mEUR"; never exponent notation."""
    if x is None or x != x:
        return "—"
    exponent = _prefix_exponent(x, -12 if unit.split(" ")[0] in PHYSICAL_UNITS else -3)
    return f"{fixed(x, exponent)} {_PREFIXES[exponent]}{unit}"


# A stored unit that tables and axes write with an SI prefix instead of a ×10ⁿ: the unit written, the factor from the
# stored unit to it, and the finest prefix it takes (energy at the facility in J rather than "kWh ×10⁻⁶", money
# to milli). A unit not here (PE's a.u., quality per unit, rates) keeps display_exponent's ×10ⁿ.
PREFIXED_UNITS: dict[str, tuple[str, float, int]] = {
    "J": ("J", 1.0, -12),
    "W": ("W", 1.0, -12),
    "J/token": ("J/token", 1.0, -12),
    "B": ("B", 1.0, 0),  # bytes in decimal prefixes (kB, MB, GB), as device memory is sold
    "kWh": ("J", 3.6e6, -12),
    "kg CO2e": ("g CO2e", 1e3, -12),
    "{currency}": ("{currency}", 1.0, -3),
    "{currency} / invPPL": ("{currency} / invPPL", 1.0, -3),
}


class Display(NamedTuple):
    """How a table or an axis writes a measure's values: each × ``factor``, in ``unit``; ``label`` names the measure
    with that unit ("Energy (mJ)"), or with the stored unit and a ×10ⁿ where no prefix applies."""

    factor: float
    unit: str
    label: str


def display(name: str, values, currency: str = "") -> Display:
    """The unit that writes ``values`` of measure ``name`` with one to three digits before the point."""
    text, unit, _ = MEASURES[name]
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    if unit not in PREFIXED_UNITS:
        exponent = display_exponent(finite)
        return Display(10.0**-exponent, unit, label(name, currency) + power_of_ten(exponent))
    written, factor, finest = PREFIXED_UNITS[unit]
    exponent = _prefix_exponent(max(finite, default=0.0) * factor, finest)
    shown = _PREFIXES[exponent] + written.format(currency=currency or "currency")
    return Display(factor / 10**exponent, shown, f"{text} ({shown})")


def duration(seconds: float) -> str:
    """ "42.0 s", "3.5 min", "2.1 h"."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def power_of_ten(exponent: int) -> str:
    """ " ×10⁻⁹" for -9; "" for 0."""
    return f" ×10{str(exponent).translate(str.maketrans('-0123456789', '⁻⁰¹²³⁴⁵⁶⁷⁸⁹'))}" if exponent else ""


def label(name: str, currency: str = "") -> str:
    """ "Energy (J)"; a money unit names the study's currency (``cost.currency``)."""
    text, unit, _ = MEASURES[name]
    unit = unit.format(currency=currency or "currency")
    return f"{text} ({unit})" if unit else text


def budget_label(tokens: int) -> str:
    """500000 -> '500K', 2000000 -> '2M' (as the study names its conditions)."""
    for div, suffix in ((1_000_000, "M"), (1_000, "K")):
        if tokens >= div and tokens % (div // 10 or 1) == 0:
            value = tokens / div
            return f"{value:g}{suffix}"
    return str(tokens)
