"""What a run will cost, printed before it starts: trials, tokens and (once measured) time."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from typing import Any

from ..common.measures import duration

# Said once in the plan, so that the line after each trial (progress.study_progress) stays short.
PROGRESS_NOTE = (
    "While it runs: a line as each trial starts and ends, then the trials done and the time and energy to go, "
    "estimated from the finished trials (process start-up between trials not included)."
)

# A trial's time limit (SLURM's --time): the plan's estimate of its training and fixed seconds with room for a slower
# node or a busier host (× 1.5), plus the process's start-up, model load, compile, cooldown and idle baseline
# (+ 15 min). Without a pilot's tokens/s there is no estimate, and the limit is a guess said to be one.
RUNTIME_MARGIN = 1.5
RUNTIME_EXTRA_MIN = 15
RUNTIME_UNKNOWN_MIN = 240


# What sets a study's tokens per second: the model, its vocabulary, the chunks and how it trains, and any design
# factor over them (a model, batch size, precision or hardware level; the whole design, so a pilot applies only to the
# design it measured). A pilot (plan.*) names the workload it measured by this key, so that a study which extends a
# config with another model, batch size or design does not inherit its pilot's time.
WORKLOAD_KEYS = {
    "design": None,
    "model": None,
    "tokenizer": ("vocab_size",),
    "chunk": ("length",),
    "train": ("batch_size", "precision", "device", "threads", "compile"),
}


def workload_key(config: dict[str, Any]) -> str:
    """A short digest of the settings that set training throughput (WORKLOAD_KEYS)."""
    parts = {
        section: config.get(section) if keys is None else {k: (config.get(section) or {}).get(k) for k in keys}
        for section, keys in WORKLOAD_KEYS.items()
    }
    # a trial on several devices is another workload; one device keeps the key it always had (and its pilots)
    if ((config.get("train") or {}).get("devices") or 1) > 1:
        parts["devices"] = config["train"]["devices"]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def pilot_of(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The config's pilot (plan.*) if it measured this study's workload (plan.workload unset, or equal to this study's
    key), else none and a sentence why."""
    pilot = config.get("plan") or {}
    measured, ours = pilot.get("workload"), workload_key(config)
    if measured and measured != ours:
        return {}, (
            f"plan.*'s pilot measured another workload (plan.workload {measured}; this study's model, vocabulary, "
            f"chunks and training settings give {ours}): its time is not used here."
        )
    return pilot, None


def planned_rate(pilot: dict[str, Any]) -> float | None:
    """The tokens per second a trial's time limit is derived from: the pilot's, else the slow end of an estimated range
    (plan.tokens_per_s_range: a limit from its fast end would stop the trials that run at its slow end)."""
    if pilot.get("tokens_per_s"):
        return float(pilot["tokens_per_s"])
    return float(pilot["tokens_per_s_range"][0]) if pilot.get("tokens_per_s_range") else None


def trial_runtime_min(tokens: int, epochs: int, pilot: dict[str, Any], checkpoint_s: float = 0.0) -> int:
    """Minutes a trial of ``tokens`` real tokens (its budget × its level's budget_scale) × ``epochs`` may run, from the
    config's ``plan`` (``planned_rate`` and the fixed seconds per trial) and the seconds its checkpoints pause it;
    RUNTIME_UNKNOWN_MIN without a rate."""
    rate = planned_rate(pilot)
    if rate is None:
        return RUNTIME_UNKNOWN_MIN
    seconds = tokens * epochs / rate + pilot.get("fixed_s", 0) + checkpoint_s
    return math.ceil(RUNTIME_MARGIN * seconds / 60) + RUNTIME_EXTRA_MIN


def cost_preview(
    expected: dict[Any, int],
    shape: str,
    epochs: int,
    finished: dict[Any, dict[str, Any]],
    cost: dict[str, Any] | None = None,
    pilot: dict[str, Any] | None = None,
    workload: str = "",
    on_gpu: bool = False,
) -> str:
    """A few lines for the log. ``expected`` maps every (cell, trial) to the real tokens its jobs train
    (``Design.trained_tokens``: a branched study's stable runs counted once); ``shape`` says how
    the design makes them ("3 budgets × 5 trials"). Time comes from trials already finished on this machine:
    seconds per real token of training, plus the median fixed cost of a trial (model build,
    device benchmark, idle baseline, eval). Process start-up is not included. Energy likewise
    (joules per real token), and from it CO2 and money where ``cost`` sets them. Before any trial has
    finished, from ``pilot`` (the config's ``plan``: a pilot's tokens/s and J/token, with its source); ``workload``: this
    study's workload key, named where a pilot would help; ``on_gpu``: the study trains on a GPU, where the plan names
    the command that measures its pace."""
    todo = [key for key in expected if key not in finished]
    tokens_all = sum(expected.values()) * epochs
    tokens_todo = sum(expected[key] for key in todo) * epochs
    lines = [
        f"tokenwatt plan: {shape} = {len(expected)} trials, "
        f"{len(todo)} without a record yet; ~{tokens_todo:,} of ~{tokens_all:,} training tokens (each trial's real tokens × epochs) to go "
        "(a trial whose code, settings or inputs changed trains again too: the job table counts every job)."
    ]
    # a branched trial's own job: its record's training less the stable run's, which other jobs trained
    timed = [own_job(m) for m in finished.values() if m.get("run_s") and m.get("real_tokens")]
    timed = [m for m in timed if m["real_tokens"] > 0]
    if not todo:
        return lines[0]
    if not timed:
        pilot_lines = _pilot_lines(pilot or {}, tokens_todo, len(todo), cost, workload, on_gpu)
        return "\n".join([*lines, *pilot_lines, PROGRESS_NOTE])
    s_per_token = statistics.median(m["train_s"] / m["real_tokens"] for m in timed)
    fixed = statistics.median(m["run_s"] - m["train_s"] for m in timed)
    seconds = tokens_todo * s_per_token + len(todo) * fixed
    lines.append(
        f"Time: ~{seconds / 60:.1f} min for the remaining trials (ESTIMATE from {len(timed)} finished trial(s): "
        f"{1 / s_per_token:,.0f} tokens/s, {fixed:.1f} s fixed per trial; process start-up not included)."
    )
    metered = [m for m in timed if m.get("energy_j") is not None]
    if metered:
        joules = tokens_todo * statistics.median(m["energy_j"] / m["real_tokens"] for m in metered)
        lines.append(_energy_line(joules, seconds, any(m.get("meter_is_estimate") for m in metered), cost))
    return "\n".join([*lines, PROGRESS_NOTE])


def budgets_share_one_process(config: dict[str, Any]) -> bool:
    """Whether the study's budgets train one process cut at different lengths: a constant rate (no warmup by share of
    the steps) over one epoch, so each trial's steps up to the smaller budget's tokens are the same in distribution
    at every budget (the trial id's seed, the same rate, an exchangeable draw of chunks). A partial config (a report
    made from records alone) is not asserted to be one."""
    train = config.get("train") or {}
    schedule = train.get("schedule") or {}
    budgets = (config.get("study") or {}).get("budgets") or []
    return (
        len(budgets) > 1
        and train.get("epochs") == 1
        and schedule.get("kind", "constant") == "constant"
        and not schedule.get("warmup_fraction")
    )


def shared_process_note(config: dict[str, Any]) -> str | None:
    """What a budget comparison of energy to a target can show where the budgets share one process
    (``budgets_share_one_process``), and the settings that tie the schedule to the budget; None elsewhere."""
    if not budgets_share_one_process(config):
        return None
    selection = ((config.get("design") or {}).get("selection")) or {}
    ordered = [k for k, v in selection.items() if isinstance(v, dict) and v.get("order", "shuffled") != "shuffled"]
    except_ordered = f" (selection levels {', '.join(ordered)} excepted: their order is their own)" if ordered else ""
    return (
        "The budgets share one process: at a constant learning rate (train.schedule.kind constant) over one epoch "
        "(train.epochs 1), up to a smaller budget's tokens a larger budget's trial is the smaller one's in "
        f"distribution (the trial id's seed, the same rate, an exchangeable draw of chunks){except_ordered}. Between "
        "budgets, energy to a target and quality at equal energy are then equal by construction: their comparison "
        "tests only the meter and the eval grid, not the budget. To tie the schedule to the budget, set "
        "train.schedule.kind cosine (a decay to each trial's own end) or wsd (a cooldown over each trial's last "
        "cooldown_fraction; with train.schedule.branch_every, every budget a cooldown branched from one stable run)."
    )


def own_job(m: dict[str, Any]) -> dict[str, Any]:
    """A finished trial's record as its own job trained it: a branched trial's (train.schedule.branch_every) without
    the stable run it continued (its tokens, seconds and energy are other jobs'); any other record as it is."""
    branch = m.get("branch")
    if not branch:
        return m
    energy, stable_j = m.get("energy_j"), branch.get("stable_energy_j")
    return {
        **m,
        "real_tokens": m["real_tokens"] - branch["from_real_tokens"],
        "train_s": m["train_s"] - branch["stable_train_s"],
        "energy_j": None if energy is None or stable_j is None else energy - stable_j,
    }


# Said where a study trains on a GPU with no pilot: the one command that measures its pace (docs/gpu.md).
GPU_VALIDATE = "bash benchmarks/gpu_validate.sh CONFIG.yaml"


def _unmeasured_lines(pilot: dict[str, Any], tokens: int, trials: int, workload: str, on_gpu: bool) -> list[str]:
    """The time line where no pilot measured this study: a range estimated without a measurement
    (plan.tokens_per_s_range), or unknown, with the way to measure it (on a GPU, benchmarks/gpu_validate.sh)."""
    key = f", and plan.workload: {workload}" if workload else ""
    measure = (
        f"run `{GPU_VALIDATE}` on the GPU first (about ten minutes): it prints the tokens/s to set as "
        f"plan.tokens_per_s{key}"
        if on_gpu
        else f"or set plan.tokens_per_s from a pilot{key}"
    )
    if pilot.get("tokens_per_s_range"):
        slow, fast = pilot["tokens_per_s_range"]
        fixed = trials * pilot.get("fixed_s", 0)
        source = f" ({pilot['source']})" if pilot.get("source") else ""
        return [
            f"Time: ~{duration(tokens / fast + fixed)} to ~{duration(tokens / slow + fixed)} for the remaining trials "
            f"(a RANGE ESTIMATED without a measurement, from plan.tokens_per_s_range = {slow:,.0f}–{fast:,.0f} "
            f"tokens/s{source}; each trial's time limit follows the slow end); to measure it, {measure}."
        ]
    return [
        "Time: unknown until the first trial finishes on this machine (its throughput calibrates this estimate; "
        f"{measure})."
    ]


def _pilot_lines(
    pilot: dict[str, Any],
    tokens: int,
    trials: int,
    cost: dict[str, Any] | None,
    workload: str = "",
    on_gpu: bool = False,
) -> list[str]:
    """Time and energy from the config's ``plan`` (a pilot measured beforehand), or ``_unmeasured_lines``."""
    if not pilot.get("tokens_per_s"):
        return _unmeasured_lines(pilot, tokens, trials, workload, on_gpu)
    source = f": {pilot['source']}" if pilot.get("source") else ""
    seconds = tokens / pilot["tokens_per_s"] + trials * pilot.get("fixed_s", 0)
    out = [
        f"Time: ~{duration(seconds)} for the remaining trials (ESTIMATE from plan.tokens_per_s = {pilot['tokens_per_s']:,.0f} "
        f"tokens/s and plan.fixed_s = {pilot.get('fixed_s', 0):g} s per trial beside training, a pilot{source}"
        + ("; said again for this machine once its device profile is measured)." if pilot.get("cs_tflops") else ").")
    ]
    if pilot.get("joules_per_token"):
        out.append(
            _energy_line(
                tokens * pilot["joules_per_token"],
                seconds,
                bool(pilot.get("energy_is_estimate")),
                cost,
                "plan.joules_per_token, a pilot",
            )
        )
    return out


def _energy_line(
    joules: float, seconds: float, estimated: bool, cost: dict[str, Any] | None, origin: str = "finished trials"
) -> str:
    from ..common.measures import fixed
    from .cost import carbon_intensity, trial_cost

    label = f"ESTIMATE from {origin}" + (", whose energy is itself estimated" if estimated else "")
    parts = [f"Energy: ~{fixed(joules / 3.6e6)} kWh"]
    if cost:
        got = trial_cost(
            {"energy_j": joules, "run_s": seconds, "inv_ppl": None}, cost, carbon_intensity(cost["carbon_intensity"])[0]
        )
        if got["kg_co2e"] is not None:
            parts.append(f"~{fixed(got['kg_co2e'] * 1000)} g CO2e")
        if got["total_cost"] is not None:
            parts.append(f"~{fixed(got['total_cost'])} {cost['currency']}")
    return ", ".join(parts) + f" for the remaining trials ({label})."
