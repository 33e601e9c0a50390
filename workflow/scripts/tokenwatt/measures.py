"""The measures the analysis reports: one place for their labels, units and how their numbers are written."""

from __future__ import annotations

import math
from typing import Any

# name -> (label, unit); the order is the order of tables and figures.
MEASURES: dict[str, tuple[str, str]] = {
    "pe": ("PE (energy-aware parameter efficiency)", "a.u."),
    "quality_per_mparam": ("Quality per parameter", "invPPL / M params"),
    "quality_per_pflop": ("Quality per compute", "invPPL / PFLOP"),
    "quality_per_kj": ("Quality per energy", "invPPL / kJ"),
    "power_rms_w": ("RMS power", "W"),
    "power_mean_w": ("Mean power", "W"),
    "energy_j": ("Energy", "J"),
    "dynamic_energy_j": ("Energy above idle", "J"),
    "joules_per_token": ("Energy per token", "J/token"),
    "train_s": ("Training time", "s"),
    "tokens_per_s": ("Throughput", "tokens/s"),
    "eval_loss": ("Eval loss", "nats/token"),
    "perplexity": ("Perplexity", ""),
    "inv_ppl": ("Quality (invPPL = 1 / perplexity)", ""),
    "kwh": ("Energy at the facility (× PUE)", "kWh"),
    "kg_co2e": ("Emissions", "kg CO2e"),
    "electricity_cost": ("Electricity cost", "cost.currency"),
    "device_cost": ("Device-hour cost", "cost.currency"),
    "total_cost": ("Cost, electricity + device", "cost.currency"),
    "cost_per_inv_ppl": ("Cost per unit of quality", "cost.currency / invPPL"),
}

# The report's conditions tables: one per family of measures.
FAMILIES: dict[str, list[str]] = {
    "Efficiency": ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj"],
    "Power and energy": ["power_rms_w", "power_mean_w", "energy_j", "dynamic_energy_j", "joules_per_token"],
    "Time and quality": ["train_s", "tokens_per_s", "eval_loss", "perplexity", "inv_ppl"],
    "Carbon and money": ["kwh", "kg_co2e", "electricity_cost", "device_cost", "total_cost", "cost_per_inv_ppl"],
}

# Measures tested with the repeated-measures ANOVA (the list: PE, its layers, power, energy, time).
TESTED = ["pe", "quality_per_mparam", "quality_per_pflop", "quality_per_kj", "power_rms_w", "energy_j", "train_s"]


# Every figure of the report, in its order; each has a caption in workflow/report/<name>.rst.
FIGURES = ["pe_by_budget", "efficiency_layers", "power_energy_by_budget", "time_by_budget", "perplexity_vs_tokens", "tradeoff", "power_traces",
           "measurement_quality", "quality_vs_cost"]


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


def power_of_ten(exponent: int) -> str:
    """ " ×10⁻⁹" for -9; "" for 0."""
    return f" ×10{str(exponent).translate(str.maketrans('-0123456789', '⁻⁰¹²³⁴⁵⁶⁷⁸⁹'))}" if exponent else ""


def label(name: str) -> str:
    text, unit = MEASURES[name]
    return f"{text} ({unit})" if unit else text


def budget_label(tokens: int) -> str:
    """500000 -> '500K', 2000000 -> '2M' (as the study names its conditions)."""
    for div, suffix in ((1_000_000, "M"), (1_000, "K")):
        if tokens >= div and tokens % (div // 10 or 1) == 0:
            value = tokens / div
            return f"{value:g}{suffix}"
    return str(tokens)
