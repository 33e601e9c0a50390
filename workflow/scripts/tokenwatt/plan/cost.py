"""Carbon and money beside joules: pure functions of a trial's energy and time and the ``cost`` config.

Grid carbon intensity comes from a number or from CodeCarbon's bundled global energy mix (a
well-kept, offline table of gCO2e/kWh per country), never from the network.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any


class CostError(ValueError):
    pass


@functools.cache
def carbon_intensity(setting: float | str | None) -> tuple[float | None, str]:
    """gCO2e per kWh and where it came from, for ``cost.carbon_intensity``. Cached: the config check
    and the plan's cost preview both ask at every Snakemake start, and the lookup reads CodeCarbon's table."""
    if setting is None:
        return None, "not set (cost.carbon_intensity)"
    if not isinstance(setting, str):
        return float(setting), "configured (cost.carbon_intensity)"
    mix = global_energy_mix()
    if setting not in mix:
        raise CostError(
            f"cost.carbon_intensity: {setting!r} is not a country code in CodeCarbon's global energy mix; "
            f"use a 3-letter ISO code such as DEU, FRA, USA, or a number in gCO2e/kWh"
        )
    row = mix[setting]
    return float(
        row["carbon_intensity"]
    ), f"{row['country_name']} ({setting}), {row.get('year', 'year unknown')}, CodeCarbon's global energy mix"


def global_energy_mix() -> dict[str, dict[str, Any]]:
    """CodeCarbon's global energy mix by ISO country code, read from the file CodeCarbon names for it: its own loader
    (DataSource.get_global_energy_mix_data) first reads all its tables, CPU power and cloud CSVs through pandas too,
    ~0.4 s of CPU in a process without pandas yet for this one JSON (the aggregate job's 1.04 s became 0.76 s; a
    Snakemake start, which has imported pandas, paid ~0.04 s)."""
    from codecarbon.input import DataSource

    return json.loads(Path(DataSource().global_energy_mix_data_path).read_text(encoding="utf-8"))


def trial_cost(trial: dict[str, Any], cost: dict[str, Any], intensity_g_per_kwh: float | None) -> dict[str, Any]:
    """kWh at the facility (energy × PUE), kgCO2e, electricity and device-hour cost, and cost per unit of quality."""
    priced = energy_cost(trial["energy_j"], device_seconds(trial), cost, intensity_g_per_kwh)
    quality = trial.get("inv_ppl")
    total, kg = priced["total_cost"], priced["kg_co2e"]
    return {
        **priced,
        "cost_per_inv_ppl": None if total is None or not quality else total / quality,
        "kg_co2e_per_inv_ppl": None if kg is None or not quality else kg / quality,
    }


def device_seconds(trial: dict[str, Any]) -> float | None:
    """A trial's device-seconds: its job's time (a branched trial's with its stable run's processes,
    train.schedule.branch_every) times the devices it held (a trial on several holds each of them for its time)."""
    seconds = trial.get("run_s")
    if seconds is None:
        return None
    return (seconds + (trial.get("branch_stable_run_s") or 0.0)) * (trial.get("devices") or 1)


def energy_cost(
    energy_j: float | None, device_s: float | None, cost: dict[str, Any], intensity_g_per_kwh: float | None
) -> dict[str, Any]:
    """kWh at the facility, kgCO2e, electricity, device-hour and total cost of ``energy_j`` joules and ``device_s``
    device-seconds: a trial's, or a study total's (whose device-seconds already count every trial's devices)."""
    kwh = None if energy_j is None else energy_j * cost["pue"] / 3.6e6
    kg = None if kwh is None or intensity_g_per_kwh is None else kwh * intensity_g_per_kwh / 1000
    price = cost["electricity_price_per_kwh"]
    electricity = None if kwh is None or price is None else kwh * price
    hour_price = cost["device_hour_price"]
    device = None if hour_price is None or device_s is None else device_s / 3600 * hour_price
    # The sum of every priced part, or nothing: with energy unmeasured but a price set, the device cost alone
    # is not "electricity + device".
    priced = [value for set_, value in ((price, electricity), (hour_price, device)) if set_ is not None]
    total = None if not priced or any(v is None for v in priced) else float(sum(priced))
    return {"kwh": kwh, "kg_co2e": kg, "electricity_cost": electricity, "device_cost": device, "total_cost": total}
