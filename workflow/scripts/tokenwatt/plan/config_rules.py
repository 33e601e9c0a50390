"""Cross-key rules of a config, which a schema would state only with unreadable if/then blocks: a local corpus with
files, a known carbon intensity, stopping rules that can act, evaluations long enough for NVML's counter, and every
design.model level checked as the model it merges to."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from . import allocation
from .config_messages import key_path, message
from .config_models import (
    architecture_problems,
    base_key,
    families_of,
    family_problems,
    level_key,
    model_problems,
    pretrained_problems,
)
from .cost import CostError, carbon_intensity
from .design import merged_model
from .optimizers import setting_problems


def requirements(cfg: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Cross-key rules that a schema would state only with unreadable if/then blocks."""
    problems = []
    if cfg["corpus"]["source"] == "local" and not cfg["corpus"]["local"]["files"]:
        problems.append("corpus.local.files: corpus.source is local, so list at least one file")
    if isinstance(cfg["cost"]["carbon_intensity"], str):
        try:
            carbon_intensity(cfg["cost"]["carbon_intensity"])
        except CostError as err:
            problems.append(str(err))
    if cfg["selection"].get("eval_filters") and not cfg["design"].get("selection"):
        problems.append(
            "selection.eval_filters: it filters the eval set of a data-selection study (design.selection), whose report "
            "says how many eval documents every level is scored on; set design.selection, or remove it"
        )
    problems += _stopping_problems(cfg)
    problems += _branch_problems(cfg)
    problems += allocation.problems(cfg)
    problems += _devices_problems(cfg)
    problems += _eval_window_problems(cfg)
    problems += setting_problems(cfg)
    base = model_problems(cfg["model"], cfg["tokenizer"], "")
    base += architecture_problems(cfg["model"], lambda f: base_key(cfg["model"], f), "")
    base += pretrained_problems(cfg["model"], cfg["tokenizer"], "model.", "tokenizer.")
    families, family_key = families_of(cfg)
    if not base:  # a size the Llama itself cannot have is named once, above
        base += family_problems(cfg["model"], families, family_key, "model")
    problems += base
    for level, spec in cfg["design"].get("model", {}).items():
        prefix = f"design.model.{level}."
        model = merged_model(cfg["model"], spec)
        tokenizer = {**cfg["tokenizer"], **spec.get("tokenizer", {})}
        found = [
            f"{prefix}{key_path(e.absolute_path) if e.absolute_path else '(level)'}: {message(e, with_key=False)}"
            for e in Draft202012Validator(schema["properties"]["model"]).iter_errors(model)
        ]
        found += [
            f"{prefix}tokenizer.{key_path(e.absolute_path)}: {message(e, with_key=False)}"
            for e in Draft202012Validator(schema["properties"]["tokenizer"]).iter_errors(tokenizer)
        ]
        if not found:
            found = model_problems(model, tokenizer, prefix)
            found += architecture_problems(
                model,
                lambda f, spec=spec, prefix=prefix: level_key(cfg["model"], spec, prefix, f),
                f" (design.model.{level})",
            )
            # A level's own keys are named under it; what it inherits was checked (and named) as the base's.
            found += pretrained_problems(
                model if {"source", "name", "revision"} & set(spec) else None,
                tokenizer if "tokenizer" in spec else None,
                prefix,
                prefix + "tokenizer.",
            )
            found += [] if found else family_problems(model, families, family_key, f"design.model.{level}")
        # What the level inherits unchanged fails as the base's does: named once, as the base's.
        problems += [p for p in found if p not in base and p.replace(f" (design.model.{level})", "", 1) not in base]
    return problems


def _stopping_problems(cfg: dict[str, Any]) -> list[str]:
    """Stopping rules that could never act, or act on nothing: a rule decided at evaluation points needs them, and
    measured training energy; a rule the analysis replays must be complete."""
    from .stopping import StopRuleError, stop_rule  # no torch, no polars

    problems = []
    online = {
        "train.stop": cfg["train"]["stop"],
        **{f"design.stopping.{k}": v for k, v in cfg["design"].get("stopping", {}).items()},
    }
    scheduled = cfg["eval"]["points"] > 1 or bool(cfg["eval"]["at_tokens"])
    for key, rule in online.items():
        if rule == "none":
            continue
        if not scheduled:
            problems.append(
                f"{key}: a stopping rule is decided at evaluation points, and eval.points is {cfg['eval']['points']} "
                "with no eval.at_tokens; set eval.points to 2 or more (or list eval.at_tokens)"
            )
        if cfg["meter"]["kind"] == "none":
            problems.append(
                f"{key}: a marginal rule weighs quality against training energy, and meter.kind none measures "
                "none; choose a meter or drop the rule"
            )
    for name, rule in cfg["analysis"]["stopping"].items():
        try:
            stop_rule(rule)
        except StopRuleError as err:
            problems.append(f"analysis.stopping.{name}: {err}")
    return problems


def _devices_problems(cfg: dict[str, Any]) -> list[str]:
    """What a trial on several devices (train.devices, design.devices) would measure wrong: a meter kind that may not
    run per rank (RAPL: the whole package, counted by every rank; measurement.kinds.refusal says), or train a global batch with fewer chunks than ranks (a rank idle at every step).
    Its checkpoints and a stable run's points hold every rank's state (training/checkpoint.py)."""
    from ..measurement.kinds import refusal  # polars only, no torch

    levels = cfg["design"].get("devices")
    most = max([cfg["train"]["devices"], *(levels or [])])
    if most <= 1:
        return []
    key = "design.devices" if levels and max(levels) > cfg["train"]["devices"] else "train.devices"
    problems = []
    if cfg["meter"]["kind"] != "auto" and (why := refusal(cfg["meter"]["kind"], ranks=most)):
        problems.append(f"{key}: {why}")
    batches = [cfg["train"]["batch_size"], *(cfg["design"].get("batch_size") or [])]
    if min(batches) < most:
        problems.append(
            f"{key}: a trial on {most} devices splits each global batch among them, so train.batch_size (and every "
            f"design.batch_size level) must be at least {most}; {min(batches)} would leave a device without a chunk at "
            "every step"
        )
    return problems


def _branch_problems(cfg: dict[str, Any]) -> list[str]:
    """What a stable run shared by every budget needs (train.schedule.branch_every): a cooldown to branch (wsd), and
    steps that do not depend on where a trial ends: one pass over the drawn order (a second epoch would repeat a
    budget's own subset), a warmup by size not by share, no stopping rule, no level order of its own."""
    schedule = cfg["train"]["schedule"]
    if schedule["branch_every"] is None:
        return []
    key, problems = "train.schedule.branch_every", []
    if schedule["kind"] != "wsd":
        problems.append(f"{key}: a branch is a wsd cooldown; set train.schedule.kind: wsd, or remove {key}")
    if cfg["train"]["epochs"] != 1:
        problems.append(
            f"{key}: the stable run is one pass over the trial's drawn chunks, and train.epochs is "
            f"{cfg['train']['epochs']} (a second epoch would repeat each budget's own subset); set train.epochs: 1"
        )
    if schedule["warmup_fraction"]:
        problems.append(
            f"{key}: train.schedule.warmup_fraction is a share of each trial's steps, so the budgets' warmups would "
            "differ inside one stable run; warm up by size instead (train.schedule.warmup_tokens_per_parameter)"
        )
    scales = [v.get("budget_scale", 1.0) for v in cfg["design"].get("model", {}).values()] or [1.0]
    batches = cfg["design"].get("batch_size") or [cfg["train"]["batch_size"]]
    step = max(batches if isinstance(batches, list) else batches.values()) * cfg["chunk"]["length"]
    if schedule["branch_every"] * min(scales) < step:
        problems.append(
            f"{key}: {schedule['branch_every']} real tokens (× the smallest budget_scale, {min(scales):g}) is under one "
            f"optimizer step's {step} (batch_size × chunk.length), so a stretch of the stable run could train no step; "
            "raise it"
        )
    stops = [k for k, rule in [("train.stop", cfg["train"]["stop"])] if rule != "none"]
    stops += [f"design.stopping.{k}" for k in cfg["design"].get("stopping", {})]
    if stops:
        problems.append(
            f"{key}: a stopping rule ({', '.join(stops)}) would end the stable run every budget branches from; remove one or the other"
        )
    ordered = [
        k
        for k, v in cfg["design"].get("selection", {}).items()
        if isinstance(v, dict) and v.get("order", "shuffled") != "shuffled"
    ]
    if ordered:
        problems.append(
            f"{key}: design.selection levels {', '.join(ordered)} train in an order of their own, in which a smaller "
            "budget's subset is not the head of a larger one's; drop their order, or remove " + key
        )
    return problems


# A forward pass is about a third of a training step's arithmetic (forward + backward), and at the eval batch it is
# no slower per token: the plan's training tokens/s times this is what an evaluation is assumed to reach at most.
EVAL_SPEEDUP = 3.0


def measures_with_nvml(cfg: dict[str, Any]) -> bool:
    """Some of the study's trials meter with NVML: meter.kind nvml, or auto on a CUDA device (train.device or a
    hardware level's; measurement.kinds.chosen_kind decides)."""
    from ..measurement.kinds import chosen_kind

    devices = {cfg["train"]["device"]} | {
        spec.get("device") or cfg["train"]["device"]
        for spec in cfg["design"].get("hardware", {}).values()
        if isinstance(spec, dict)
    }
    return any(chosen_kind(cfg["meter"]["kind"], device) == "nvml" for device in devices)


def _eval_window_problems(cfg: dict[str, Any]) -> list[str]:
    """An intermediate evaluation too short for NVML's energy counter, refused before any GPU time is spent: its
    length estimated from the pilot's throughput (plan.tokens_per_s); a trial refuses it too, once measured."""
    from ..measurement.energy import short_eval_window
    from ..measurement.nvml import NvmlReader  # polars only, no torch
    from .preview import pilot_of

    schedule, tokens_per_s = cfg["eval"], pilot_of(cfg)[0].get("tokens_per_s")
    intermediate = schedule["points"] > 1 or bool(schedule["at_tokens"])
    if not (intermediate and schedule["max_tokens"] and tokens_per_s and measures_with_nvml(cfg)):
        return []
    seconds = schedule["max_tokens"] / (EVAL_SPEEDUP * tokens_per_s)
    how = f"estimated at {EVAL_SPEEDUP:g} × plan.tokens_per_s, forward only"
    problem = short_eval_window(seconds, schedule["max_tokens"], NvmlReader.update_period_s, how)
    return [problem] if problem else []
