"""The report's layout: the question and its answer first, the answering figure under it, a table of contents, the
detail folded; and the answer the terminal prints at the end of a run (tokenwatt.presentation.answer)."""

import io
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from curve_study import BUDGETS, budget_study
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.curves.summary import curves_product
from tokenwatt.analysis.stats import stats_product
from tokenwatt.plan.config import load_schema, validate_config
from tokenwatt.presentation import figures as F
from tokenwatt.presentation.inputs import ReportInputs
from trial_records import COST, QUALITY, aggregate, raw_record

ROOT = Path(__file__).resolve().parents[1]
N_TRIALS = 5


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    return buf.getvalue()


def default_like_inputs(figures: bool = True) -> ReportInputs:
    """The report's inputs for a study shaped like the default (3 budgets × 5 trials, 8 eval points each, energy
    estimated, CO2 and money priced), from eval curves built by hand (curve_study) and each trial's record read off
    its curve's last point; the config is the shipped default's, validated, with these budgets."""
    curves = budget_study(n=N_TRIALS, points=8, seed=4)
    final = curves.filter(pl.col("final")).sort("budget", "trial")
    power = 32 * np.random.default_rng(4).lognormal(0, 0.02, final.height)  # the CPU estimate's few-% spread
    records = [
        raw_record(
            r["budget"],
            r["trial"],
            real_tokens=r["real_tokens"],
            padded_tokens=r["real_tokens"] + 30,
            steps=r["real_tokens"] // 256,
            epochs=1,
            eval_loss=r["eval_loss"],
            train_s=r["train_energy_j"] / power[i],
            duration_s=r["train_energy_j"] / power[i],
            energy_j=r["train_energy_j"],
            power_rms_w=power[i],
            power_mean_w=power[i],
            started_at_unix_s=1e9 + 10 * i,
        )
        for i, r in enumerate(final.iter_rows(named=True))
    ]
    trials, missing = aggregate(
        records,
        [(b, t) for t in range(1, N_TRIALS + 1) for b in BUDGETS],
        quality={**QUALITY, "min_samples": 10},
        cost={**COST, "electricity_price_per_kwh": 0.3, "device_hour_price": 2.0},
        intensity=400.0,
    )
    conditions = conditions_table(trials)
    changes = changes_table(conditions)
    shipped = __import__("yaml").safe_load((ROOT / "config" / "config.yaml").read_text())
    shipped["study"] = {**shipped["study"], "budgets": BUDGETS, "trials": N_TRIALS}
    config = validate_config(shipped, load_schema(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    products = {
        "stats": stats_product(trials, False).data,
        "curves": curves_product(trials=trials, curves=curves, cost={}, settings=config["analysis"]).data,
    }
    made = {}
    if figures:
        trace = pl.DataFrame({"t_s": [0.0, 0.5, 1.0], "power_w": [30.0, 32.0, 31.0]})
        drawn = F.make_all(trials, conditions, changes, {(f"b{b}", 1): trace for b in BUDGETS}, True, "EUR", curves)
        captions = {k: (ROOT / "workflow" / "report" / f"{k}.rst").read_text().strip() for k in drawn}
        made = {k: (_png(f), captions[k]) for k, f in drawn.items()}
        import matplotlib.pyplot as plt

        plt.close("all")
    return ReportInputs(
        config=config,
        config_hash="abc123",
        trials=trials,
        conditions=conditions,
        changes=changes,
        products=products,
        missing=missing,
        figures=made,
        reference=json.loads((ROOT / "resources" / "reference_study.json").read_text()),
        data_summary={"documents_in": 4000, "documents_out": 3990},
        profiles={"": None},
        cs={"": (0.0674, "measured: device profile")},
        rerun=[],
        profile_check=[],
        cost={},
    )


@pytest.fixture(scope="module")
def inputs():
    return default_like_inputs()


@pytest.fixture(scope="module")
def page(inputs):
    from tokenwatt.presentation.report import render_report

    return render_report(inputs)


def _answer(page: str) -> str:
    """The answer's block: from its heading to the end of its box."""
    start = page.index('<h2 id="answer">')
    return page[start : page.index("</div>", start)]


def _text(html_part: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", html_part))


def test_the_page_opens_with_the_question_then_the_answer_then_its_figure_before_any_table(page):
    question = page.index("<b>The question.</b>")
    answer = page.index('<h2 id="answer">')
    figure = page.index('<figure id="fig-quality_vs_energy">')
    assert question < answer < figure < page.index("<table") and figure < page.index('<section id="conditions">')
    assert page.count('id="fig-quality_vs_energy"') == 1  # moved from Figures, not copied
    said = _text(page[question : page.index("</p>", question)])
    assert "the energy it takes to train a language model" in said and "(PE)" in said
    assert "RMS(W)" not in said  # the formula stands where PE is defined, under Conditions
    assert "K · invPPL · CS_TFLOPS" in _text(page[page.index('<section id="conditions">') :])


def test_the_answer_names_every_targets_energy_and_every_ratio_the_tables_hold(inputs, page):
    answer = _text(_answer(page))
    curves = inputs.product("curves")
    for r in curves["energy_to_target"]:
        assert r["target"] in answer
    refused = 0
    for c in curves["energy_to_target_comparisons"]:
        name = f"{budget(c['budget_b'])} / {budget(c['budget_a'])}"
        start = answer.index(f"To reach {c['target']},")
        mine = answer[start : answer.find("To reach", start + 1)]
        if c["ratio"] is None:
            refused += 1
            assert re.search(re.escape(name) + r" no ratio[¹²³⁴⁵⁶⁷⁸⁹]", mine), (name, mine)
        else:
            assert f"{name} {c['ratio']:.3f} [{c['ci95_low']:.3f}, {c['ci95_high']:.3f}]" in mine
    reasons = {c["status"] for c in curves["energy_to_target_comparisons"] if c["ratio"] is None}
    assert refused and all(answer.count(why) == 1 for why in reasons)  # each reason once, as a footnote
    assert "rank test" in answer and "share one process" in answer  # both kept from the first target's sentence


def budget(b: int) -> str:
    from tokenwatt.common.measures import budget_label

    return budget_label(b)


def test_the_answer_says_how_energy_grew_with_the_tokens_in_joules_per_token_and_per_doubling(inputs, page):
    answer = _text(_answer(page))
    per_token = inputs.conditions.filter(pl.col("measure") == "joules_per_token").sort("budget")
    from tokenwatt.common.measures import si

    for r in per_token.iter_rows(named=True):
        assert f"{si(r['center'], 'J')} at {budget(r['budget'])}" in answer
    energy = inputs.conditions.filter((pl.col("measure") == "energy_j") & pl.col("change").is_not_null())
    for r in energy.iter_rows(named=True):
        assert f"{r['change']:+.1f} % [" in answer
    assert answer.count("per doubling") == energy.height
    assert "as if training energy grew in proportion to the tokens" in answer  # every step's J/token interval holds 0


def test_a_significant_ratio_is_said_whichever_pair_it_is_and_a_refused_one_in_a_word_and_a_note():
    from tokenwatt.presentation.sections.curves import target_sentences

    def reach(budget, median):
        return {"target": "perplexity 6.09", "series": "", "budget": budget, "n": 5, "n_reached": 5}, median

    def pair(a, b, ratio, p, status="ok"):
        low, high = (ratio * 0.93, ratio * 1.08) if ratio else (None, None)
        return {
            **dict(target="perplexity 6.09", series="", budget_a=a, budget_b=b, ratio=ratio, ci95_low=low),
            **dict(ci95_high=high, p=p, p_holm=p, status=status, rank_p=None),
        }

    rows = []
    for b, m in (reach(50_000, 60.0), reach(100_000, 55.0), reach(200_000, 61.0)):
        rows.append({**b, "energy_median_j": m, "energy_ci95_low_j": m * 0.9, "energy_ci95_high_j": m * 1.1})
    why = "2 of 5 trial ids crossed the target between eval points under both conditions"
    curves = {
        "energy_to_target": rows,
        "energy_to_target_comparisons": [
            pair(50_000, 100_000, None, None, why),
            pair(50_000, 200_000, 1.02, 0.61),
            pair(100_000, 200_000, 1.10, 0.029),  # not the widest pair: the summary once showed only that one
        ],
    }
    notes: list[str] = []
    [said] = target_sentences(curves, notes=notes)
    assert "200K / 100K 1.100 [1.023, 1.188], p = .029" in said and "200K / 50K 1.020" in said
    assert "100K / 50K no ratio¹" in said and why not in said and notes == [why]


def test_the_table_of_contents_links_every_section_and_every_section_has_an_anchor(page):
    # a section's anchor: its heading's id, or the <section> around it where its template gives none
    anchors = re.findall(r'<(?:h2|section) id="([^"]+)">', page)
    nav = page[page.index('<nav class="toc">') : page.index("</nav>")]
    assert re.findall(r'href="#([^"]+)"', nav) == anchors
    assert len(anchors) == len(set(anchors)) == page.count("<h2") >= 9
    assert page.index("</nav>") < page.index('<h2 id="answer">')


def test_the_detail_is_folded_and_the_configuration_shows_what_the_study_set(inputs, page):
    for section in ("statistics", "reference"):
        start = page.index("<h2", page.index(f'<section id="{section}">'))
        body = page[start : page.index("<h2", start + 1)]
        assert body.index("<details>") < body.index("<p")  # the heading shown, the body folded under it
    provenance = page[page.index('<h2 id="provenance">') :]
    dump = provenance[provenance.index("<pre>") : provenance.index("</pre>")]
    assert provenance.index("<details>") < provenance.index("<pre>")
    shown = json.loads(_text(dump.removeprefix("<pre>")))
    assert shown["study"]["budgets"] == BUDGETS and shown["train"]["batch_size"] == 4  # set by the config
    # at the schema's default: written out in config/config.yaml, or only filled in by validation
    assert "run_order" not in shown["study"] and "cpu_tdp_w" not in shown.get("meter", {})
    assert "stopping" not in shown.get("analysis", {}) and "results" not in shown


def test_the_answer_file_holds_the_answers_short_form_a_sentence_a_line(inputs):
    from tokenwatt.presentation.sections.summary import answer_lines

    lines = answer_lines(inputs)
    assert len(lines) == 4 and lines[0].startswith("Energy per token was") and lines[2].startswith("PE changed by")
    assert lines[3].startswith("Caveats: energy and power are estimated")  # the crafted study's meter is the estimate
    curves = inputs.product("curves")
    assert all(t["target"] in lines[1] for t in curves["energy_to_target"])
    ratios = [c for c in curves["energy_to_target_comparisons"]]
    assert lines[1].count(" / ") == len(ratios) and lines[1].count("no ratio") == sum(
        c["ratio"] is None for c in ratios
    )


def test_a_run_ends_with_the_answer_and_the_reports_url_for_each_report_it_made(tmp_path):
    import io
    import os
    import time

    from tokenwatt.plan.layout import answer_path
    from tokenwatt.presentation.finished import finished_lines, print_finished

    report, interim = tmp_path / "report.html", tmp_path / "interim" / "report.html"
    interim.parent.mkdir()
    for page in (report, interim):
        page.write_text("<html></html>")
        Path(answer_path(page)).write_text("Energy per token was 1.0 mJ at 50K.\nPE changed by -59.0 %.\n")
    started = time.time() - 5
    os.utime(interim, (started - 60, started - 60))  # an interim report of an earlier run
    lines = finished_lines([report, interim], started)
    assert lines[-1].endswith(report.resolve().as_uri()) and lines[-1].startswith("The report")
    assert "  Energy per token was 1.0 mJ at 50K." in lines and "INTERIM" not in " ".join(lines)
    os.utime(interim, None)  # an interim report made now: named as such
    assert "tokenwatt INTERIM answer" in " ".join(finished_lines([report, interim], started))
    Path(answer_path(report)).unlink()  # no answer: nothing said for that report, and nothing raised
    assert finished_lines([report], started) == []
    out = io.StringIO()
    print_finished([tmp_path / "missing.html", tmp_path], started, out)  # nothing there, or a folder: silence
    (tmp_path / "answer.txt").write_bytes(b"\xff\xfe not text")
    print_finished([report], started, out)
    assert out.getvalue() == ""


def test_the_answer_is_printed_as_the_process_exits_after_whatever_snakemake_logs_last(tmp_path):
    import subprocess
    import sys

    report = tmp_path / "results" / "report.html"
    report.parent.mkdir()
    report.write_text("<html></html>")
    (report.parent / "answer.txt").write_text("Energy per token was 1.0 mJ at 50K.\n")
    code = (
        "from tokenwatt.presentation.finished import at_exit\n"
        f"at_exit([{str(report)!r}], 0.0)\n"
        "print('Workflow Finished', flush=True)\n"  # what Snakemake logs after its onsuccess handler
    )
    got = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "workflow" / "scripts", check=True
    )
    lines = got.stdout.strip().splitlines()
    assert lines[0] == "Workflow Finished" and lines[-2] == "  Energy per token was 1.0 mJ at 50K."
    assert lines[-1].endswith(report.resolve().as_uri())


@pytest.mark.workflow
def test_the_tiny_study_says_its_answer_and_its_reports_url_when_it_ends(study):
    # terminal.txt holds the run's stdout, then its stderr: the answer ends the stdout (printed as Snakemake exits)
    said = (study / "terminal.txt").read_text().splitlines()
    answer = (study / "results" / "answer.txt").read_text().splitlines()
    at = said.index("tokenwatt answer:")
    block = said[at : next(i for i in range(at, len(said)) if said[i].startswith("The report")) + 1]
    assert block[-1].startswith("The report") and block[-1].endswith("/results/report.html")
    assert block[-1].split(": ", 1)[1].startswith("file:///")
    assert " ".join(line.strip() for line in block[1:-1]) == " ".join(answer)
    assert answer[0].startswith("Energy per token was") and answer[-2].startswith("PE changed by")
    assert answer[-1].startswith("Caveats: energy and power are estimated")


def test_the_terminal_answer_says_an_estimate_and_every_ratios_holm_and_rank_test():
    from tokenwatt.presentation.answer import terminal_lines

    pair = {"target": "perplexity 9.45", "series": "", "budget_a": 50000, "budget_b": 200000, "ratio": 1.10}
    pair |= {"ci95_low": 1.02, "ci95_high": 1.19, "p": 0.029, "p_holm": 0.087, "rank_p_holm": 0.31}
    pair |= {"rank_p_holm_floor": 0.0012}
    curves = {"energy_to_target": [{"target": "perplexity 9.45"}], "energy_to_target_comparisons": [pair]}
    caveat = "Caveats: energy and power are estimated from CPU utilisation, not measured."
    changes = ["PE (a) changed by -59.4 %.", "Perplexity (a) changed by -38.5 %.", "PE (b) changed by -50.0 %."]
    lines = terminal_lines(["Energy per token was 855 µJ."], curves, changes, caveat)
    assert lines[-1] == caveat
    assert "Holm .087" in lines[1] and "rank test Holm .31" in lines[1]
    assert [line for line in lines if line.startswith("PE")] == [changes[0], changes[2]]
