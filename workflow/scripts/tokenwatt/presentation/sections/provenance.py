"""Provenance: when the trials ran and the report was made, from which code, config and device, with which
packages; last, folded, the configuration as the study set it (every key whose value is not the schema's default)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from markupsafe import Markup

from ...common.provenance import utc
from ...plan.design import series_label
from ..html import num, table, text
from ..inputs import ReportInputs
from ..meter_notes import meter_provenance
from ..templating import render_template


def render(inputs: ReportInputs) -> Markup:
    trials = inputs.trials
    first = trials.row(0, named=True) if trials.height else {}
    return render_template(
        "sections/provenance.html.j2",
        items=table(["item", "value"], [[text(k), text(v)] for k, v in _items(inputs, first)]),
        trial_versions=json.dumps(
            {k[len("versions_") :]: v for k, v in first.items() if k.startswith("versions_")}, sort_keys=True
        ),
        report_versions=json.dumps(inputs.made.get("versions", {}), sort_keys=True),
        config=json.dumps(set_by_study(inputs.config), indent=2, sort_keys=True, default=str),
    )


# The schema beside the library, in a checkout and in a remote module's source cache alike (workflow/MANIFEST.txt).
SCHEMA = Path(__file__).resolve().parents[3].parent / "schemas" / "config.schema.yaml"


def set_by_study(config: dict[str, Any], schema_path: Path = SCHEMA) -> dict[str, Any]:
    """The validated config less every value the schema's default gave it: what the study itself chose, which is what
    a reader compares between studies. A key set to its default value is left out too (it changes nothing); the
    config hash above covers the whole validated config, defaults included. Without the schema, the whole config."""
    try:
        schema = yaml.safe_load(schema_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return config
    return _without_defaults(config, schema)


def _without_defaults(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``config`` at one level of the schema, its keys at their defaults left out, and a mapping that holds nothing
    else once they are (a section the study did not touch)."""
    schema = next((b for b in schema.get("oneOf", []) if b.get("type") == "object"), schema)  # a level's mapping
    properties, other = schema.get("properties", {}), schema.get("additionalProperties")
    out = {}
    for key, value in config.items():
        sub = properties.get(key, other if isinstance(other, dict) else {})
        # == as the canonical spelling compares: 0 == 0.0, and mappings whatever their keys' order
        if "default" in sub and value == sub["default"]:
            continue
        if isinstance(value, dict) and sub:
            value = _without_defaults(value, sub)
            if not value and "default" in sub:
                continue
        out[key] = value
    return out


def _items(inputs: ReportInputs, first: dict[str, Any]) -> list[list[Any]]:
    trials, made, summary = inputs.trials, inputs.made, inputs.data_summary
    started = (
        trials["started_at_unix_s"].drop_nulls()
        if "started_at_unix_s" in trials.columns
        else pl.Series([], dtype=pl.Float64)
    )
    meters = sorted(set(trials["meter"].to_list())) if "meter" in trials.columns else []
    cs = "; ".join(
        f"{series_label(k.rstrip('/')) + ': ' if k else ''}{num(v)} ({src})" for k, (v, src) in inputs.cs.items()
    )
    return [
        ["trials ran", f"{utc(started.min())} to {utc(started.max())}" if len(started) else "—"],
        ["report made", made.get("at", "—")],
        ["workflow code (git)", made.get("git", "—")],
        ["config hash", inputs.config_hash],
        ["meter(s)", ", ".join(meters)],
        *meter_provenance(trials),
        ["device", first.get("device_name")],
        ["device kind", first.get("device")],
        *([["GPU UUID", first.get("device_uuid")]] if first.get("device_uuid") else []),
        ["precision", _distinct(trials, "precision")],
        ["parameters", _distinct(trials, "params")],
        ["optimizer", _distinct(trials, "optimizer")],
        ["training stack", _training_stack(trials)],
        ["power polling interval (s)", first.get("interval_requested_s")],
        ["CS_TFLOPS", cs],
        ["trials finished", trials.height],
        ["corpus", _corpus(summary.get("corpus"))],
        ["documents in / out of normalization", f"{summary.get('documents_in')} / {summary.get('documents_out')}"],
        ["eval copies left training (split.decontaminate)", _decontaminated(summary.get("decontaminate"))],
    ]


def _corpus(record: dict[str, Any] | None) -> str:
    """Where the documents came from: a package by name, version and both licences; files by count and sha256."""
    if not record:
        return "—"
    files = record.get("files") or []
    digests = "; ".join(f"{f['path']} sha256 {f['sha256'][:12]}…" for f in files[:3]) + (
        f"; and {len(files) - 3} more" if len(files) > 3 else ""
    )
    if record["source"] == "package":
        packages = ", ".join(
            f"{d['name']} {d['version']} (package licence {d['package_licence']})" for d in record["distributions"]
        )
        text_licence = record.get("text_licence") or "not stated in corpus.package.text_licence"
        return (
            f"{record['documents']} documents of the installed {packages}; the text's licence: {text_licence}. "
            + digests
        )
    if record["source"] == "hf":
        s = record["settings"]
        return f"{record['documents']} documents of {s['name']} ({s['split']}, revision {s.get('revision') or 'not pinned'})"
    return f"{record['documents']} documents ({record['source']}): " + (digests or "no file read")


def _decontaminated(step: dict[str, Any] | None) -> str:
    """How many training documents held most of an eval document and left, before any selection level."""
    if not step:
        return "—"
    s = step["settings"]
    return (
        f"{step['removed']} of {step['documents_in']} training documents held ≥ {s['containment']:g} of an eval "
        f"document's {s['shingle_size']}-word shingles and left training, before any selection level (so from every "
        "level)"
    )


def _distinct(trials: pl.DataFrame, column: str) -> str:
    """A column's values over the trials, each once in order (a factorial study varies several)."""
    if column not in trials.columns:
        return "—"
    return ", ".join(dict.fromkeys(str(v) for v in trials[column].to_list() if v is not None)) or "—"


def _training_stack(trials: pl.DataFrame) -> str:
    """Which implementation trained, compiled or not; every combination that occurred, so a mixed study shows."""
    if "implementation" not in trials.columns:
        return "—"
    compiled = trials["compiled"] if "compiled" in trials.columns else pl.Series([False] * trials.height)
    stacks = {
        f"{impl}{' (torch.compile)' if comp else ''}" for impl, comp in zip(trials["implementation"], compiled) if impl
    }
    return ", ".join(sorted(stacks)) or "—"
