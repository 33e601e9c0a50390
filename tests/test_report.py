import html
import io
import json
import re
import shutil
import subprocess

import numpy as np
import polars as pl
import pytest
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.products import product
from tokenwatt.analysis.stats import stats_product
from tokenwatt.common.measures import TESTED
from tokenwatt.presentation import figures as F
from tokenwatt.presentation.inputs import ReportInputs
from tokenwatt.presentation.report import render_report
from trial_records import COST, QUALITY, aggregate, raw_record
from workflow_helpers import chromium_title

# one worker runs the module's tests, which read the module's fixtures computed once (conftest.py)
pytestmark = pytest.mark.xdist_group("report")

BUDGETS = [10_000, 20_000, 40_000]
FIGURES = list(product("trials").figures)


def _records(meter="estimate", n=5):
    """Raw trial records with the shape of a real study: loss falls and energy doubles with the budget."""
    rng = np.random.default_rng(0)
    out = []
    for t in range(1, n + 1):
        for i, b in enumerate(BUDGETS):
            train_s = 5.0 * 2**i + rng.normal(0, 0.05)
            power = 32 + rng.normal(0, 0.3)
            out.append(
                raw_record(
                    b,
                    t,
                    meter=meter,
                    eval_loss=2.8 - 0.4 * i + rng.normal(0, 0.03),
                    train_s=train_s,
                    duration_s=train_s,
                    power_rms_w=power,
                    power_mean_w=power,
                    energy_j=power * train_s,
                    started_at_unix_s=float(rng.uniform(0, 1000)),
                )
            )
    return out


PROFILE = {
    "cs_tflops": 0.15,
    "median_tflops": 0.15,
    "q25_tflops": 0.149,
    "q75_tflops": 0.151,
    "iqr_tflops": 0.002,
    "cv": 0.01,
    "windows": 30,
    "window_s": 0.1,
    "warmup_s": 1.0,
    "matmul_size": 512,
    "dtype": "float32",
    "threads": 1,
    "device_name": "Test CPU",
}


@pytest.fixture(scope="module")
def analysed():
    records = _records()
    records[-1]["check_after_tflops"] = [0.1] * 3  # one disturbed trial: its after-check fell by a third
    trials, missing = aggregate(
        records,
        [(b, t) for t in range(1, 6) for b in BUDGETS],
        quality={**QUALITY, "min_samples": 10},
        cost={**COST, "electricity_price_per_kwh": 0.3, "device_hour_price": 2.0},
        intensity=400.0,
    )
    conditions = conditions_table(trials)
    changes = changes_table(conditions)
    return trials, conditions, changes, stats_product(trials, False).data, missing


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    return buf.getvalue()


@pytest.fixture(scope="module")
def figures(analysed):
    trials, conditions, changes, _, _ = analysed
    trace = pl.DataFrame({"t_s": [0.0, 0.5, 1.0], "power_w": [30.0, 32.0, 31.0]})
    # Each trial's eval curve: three points, the loss falling and the training energy growing with its tokens.
    curves = pl.DataFrame(
        [
            {
                "cell": r["cell"],
                "series": r["series"],
                "budget": r["budget"],
                "trial": r["trial"],
                "point": k,
                "real_tokens": r["real_tokens"] * k // 3,
                "train_energy_j": r["energy_j"] * k / 3,
                "eval_loss": r["eval_loss"] + 0.3 * (3 - k),
                "final": k == 3,
            }
            for r in trials.iter_rows(named=True)
            for k in (1, 2, 3)
        ]
    )
    made = F.make_all(trials, conditions, changes, {(f"b{b}", 1): trace for b in BUDGETS}, True, "EUR", curves)
    assert list(made) == FIGURES
    return made


def _report(analysed, figures, name="tiny <script>alert('x')</script> study", missing=None):
    trials, conditions, changes, stats, _ = analysed
    reference = json.loads(open("resources/reference_study.json").read())
    study = {"name": name, "budgets": BUDGETS, "trials": 5}
    return render_report(
        ReportInputs(
            config={"study": study},
            config_hash="abc123",
            trials=trials,
            conditions=conditions,
            changes=changes,
            products={"stats": stats},
            missing=missing or [],
            figures={k: (_png(f), f"caption of {k}") for k, f in figures.items()},
            reference=reference,
            data_summary={"documents_in": 10, "documents_out": 9},
            profiles={"": PROFILE},
            cs={"": (0.15, "measured: device profile")},
            rerun=["results/trials/b40000/t5/metrics.json"],
            profile_check=[{"profile": "", "status": "ok", "reference": "the device profile", "reasons": []}],
        )
    )


def test_quality_against_energy_and_money_has_a_panel_for_each_and_a_mean_per_budget(figures):
    fig = figures["quality_vs_cost"]
    assert [ax.get_xlabel().split(" (")[0] for ax in fig.axes] == ["Energy per trial at the facility", "Cost per trial"]
    assert all(len(ax.get_legend().get_texts()) == 3 for ax in fig.axes)  # one mean ± CI per budget


def test_every_figure_labels_its_axes_with_units(figures):
    for name, fig in figures.items():
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_ylabel(), name
    assert "(W)" in figures["power_energy_by_budget"].axes[0].get_ylabel()
    assert "ESTIMATED" in figures["pe_by_budget"].axes[0].get_title()


def test_report_embeds_every_figure(analysed, figures):
    page = _report(analysed, figures)
    assert page.count('src="data:image/png;base64,') == len(FIGURES)
    assert "http://" not in page and "https://" not in page  # self-contained


def test_report_carries_the_numbers_of_the_stats(analysed, figures):
    stats = analysed[3]
    page = _report(analysed, figures)
    assert set(stats["not_tested"]) == {"power_rms_w"}  # the estimate meter makes power flat: said, not tested
    for dv in TESTED:
        shown = stats["not_tested"][dv] if dv in stats["not_tested"] else stats["anova"][dv]["apa"]
        assert html.escape(shown) in page


def test_strings_from_config_are_escaped(analysed, figures):
    page = _report(analysed, figures)
    assert "<script>" not in page
    assert "tiny &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; study" in page


def test_estimated_energy_carries_a_visible_warning(analysed, figures):
    assert "Energy and power are ESTIMATED" in _report(analysed, figures)


def test_missing_trials_are_named_in_the_report(analysed, figures):
    page = _report(analysed, figures, missing=["budget 40000 trial 3: no metrics"])
    assert "Missing or failed trials" in page and "budget 40000 trial 3: no metrics" in page


def test_the_quality_section_names_flagged_trials_with_their_reasons_and_the_rerun_command(analysed, figures):
    page = _report(analysed, figures)
    assert "1 trial(s) flagged" in page and "1 of 15 trials flagged" in page
    assert "matmul check against the reference throughput: after -33 %" in page
    assert "--forcerun results/trials/b40000/t5/metrics.json" in page


def test_the_quality_section_repeats_the_statistics_without_flagged_trials(analysed, figures):
    stats = analysed[3]
    assert stats["flagged"] == [["b40000", 5]]  # (cell, trial)
    assert stats["anova"]["pe"]["n_trials"] == 5 and stats["sensitivity"]["anova"]["pe"]["n_trials"] == 4
    page = _report(analysed, figures)
    assert "sensitivity analysis repeats them on subjects without a flagged trial (4 subjects)" in page
    assert html.escape(stats["sensitivity"]["anova"]["pe"]["apa"]) in page


def test_the_report_shows_cs_tflops_from_the_device_profile(analysed, figures):
    page = _report(analysed, figures)
    assert "CS_TFLOPS</b> = 0.1500 TFLOP/s — measured: device profile" in page
    assert "Drift." in page


def test_the_estimate_warning_says_its_power_depends_on_the_load(analysed, figures):
    assert "depends on how much CPU the trial got" in _report(analysed, figures)


def test_conditions_tables_have_no_exponent_notation_and_state_each_rows_power_of_ten(analysed, figures):
    import re

    page = _report(analysed, figures)
    section = page[page.index("<h2>Conditions</h2>") : page.index("<h2>Statistics</h2>")]
    assert not re.search(r"\de[-+]\d", section)
    assert "PE (energy-aware parameter efficiency) (a.u.) ×10⁻⁹" in section or "×10⁻⁶" in section
    assert "<h3>Efficiency</h3>" in section and "<h3>Power and energy</h3>" in section and "10K (n = 5)" in section
    assert "td{" in page and "white-space:nowrap" in page  # numbers never break across lines


@pytest.mark.parametrize(
    "x,scale,text",
    [
        (4.985e-08, -9, "49.85"),
        (0.000123, 0, "0.0001230"),
        (24268.23, 0, "24,268"),
        (float("inf"), 0, "∞"),
        (None, 0, "—"),
    ],
)
def test_numbers_are_written_in_fixed_notation_with_four_significant_digits(x, scale, text):
    from tokenwatt.common.measures import fixed

    assert fixed(x, scale) == text


def test_report_shows_the_reference_figures_side_by_side(analysed, figures):
    page = _report(analysed, figures)
    assert "Against the reference study" in page and "0.85 (0.02)" in page and "24268.23" in page


def test_report_opens_in_headless_chromium_and_a_screenshot_is_taken(analysed, figures, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed for this test: `make test` installs it (apt-get install chromium)"
    page = tmp_path / "report.html"
    page.write_text(_report(analysed, figures))
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,12000",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"))
    assert img.shape == (12000, 1200)
    # summary and tables at the top, figures and the quality section further down: content in every third
    for part in np.array_split(img, 3):
        assert len(np.unique(part)) > 20


def _study(shape: str):
    budgets, n = {"one budget": ([10_000], 3), "one trial": (BUDGETS, 1)}.get(shape, (BUDGETS, 3))
    recs = [
        raw_record(b, t, eval_loss=2.8 - 0.1 * i - 0.01 * t) for t in range(1, n + 1) for i, b in enumerate(budgets)
    ]
    if shape == "meter none":
        recs = [
            {
                **r,
                "meter": "none",
                "energy_j": None,
                "power_rms_w": None,
                "power_mean_w": None,
                "power_max_w": None,
                "idle_power_w": None,
                "samples_with_power": 0,
            }
            for r in recs
        ]
    if shape == "no finished trials":
        recs = [None] * len(recs)
    if shape == "all diverged":
        recs = [
            {**r, "status": "diverged", "diverged_at_step": 3, "diverged_in_epoch": 1, "eval_loss": None} for r in recs
        ]
    return recs, [(r_b, r_t) for r_t in range(1, n + 1) for r_b in budgets]


@pytest.mark.parametrize("shape", ["meter none", "one budget", "one trial", "no finished trials", "all diverged"])
def test_every_study_the_schema_accepts_ends_in_a_report(shape, tmp_path):
    from tokenwatt.analysis.tables import read_changes, read_conditions

    recs, expected = _study(shape)
    power = pl.DataFrame(
        {"t_s": [0.0, 0.05], "power_w": [None, None] if shape == "meter none" else [32.0, 32.0]},
        schema={"t_s": pl.Float64, "power_w": pl.Float64},
    )
    trials, missing = aggregate(recs, expected, quality={**QUALITY, "min_samples": 10})
    conditions_table(trials).write_csv(tmp_path / "conditions.csv")  # the CSV round trip the rules make
    conditions = read_conditions(tmp_path / "conditions.csv")
    changes_table(conditions).write_csv(tmp_path / "changes.csv")
    changes = read_changes(tmp_path / "changes.csv")
    stats = stats_product(trials, False).data
    made = F.make_all(trials, conditions, changes, {(f"b{b}", 1): power for b in {b for b, _ in expected}}, False)
    assert list(made) == FIGURES
    page = render_report(
        ReportInputs(
            config={"study": {"name": shape, "budgets": sorted({b for b, _ in expected}), "trials": 3}},
            config_hash="x",
            trials=trials,
            conditions=conditions,
            changes=changes,
            products={"stats": stats},
            missing=missing,
            figures={k: (_png(f), k) for k, f in made.items()},
            reference=json.loads(open("resources/reference_study.json").read()),
            data_summary={},
            profiles={"": None},
            cs={"": (0.15, "configured")},
            rerun=[],
            profile_check=[{"profile": "", "status": "no profile", "reasons": []}],
        )
    )
    assert page.count("data:image/png;base64,") == len(FIGURES)
    if shape in ("no finished trials", "all diverged"):
        assert "Missing or failed trials" in page and "No finished trials" in page
    if shape == "all diverged":
        assert "diverged at step 3" in page
    if shape == "meter none":
        assert "Energy was not measured" in page
        assert "not measured: meter none" in made["pe_by_budget"].axes[0].texts[0].get_text()
    if shape == "one budget":
        assert "an ANOVA needs at least 2" in page and "With one budget (" in page
    if shape == "one trial":
        assert "the analysis needs at least 3" in page
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_summary_says_what_changed_how_sure_we_are_what_it_cost_and_the_caveats(analysed, figures):
    page = _report(analysed, figures)
    summary = page[page.index('<h2 id="answer">') :]  # the answer's box (tests/test_report_layout.py)
    summary = summary[: summary.index("</div>")]
    assert (
        "PE changed by" in summary and "from 10K to 40K tokens (geometric mean ratio over 5 trials, 95 % CI" in summary
    )
    assert (
        "The budget effect on log PE is statistically significant (p" in summary
        and "Its size is large (η²G = ." in summary
    )
    assert "Wh (" in summary and "ESTIMATED" in summary
    assert "e-0" not in summary and "0.0000" not in summary  # SI prefixes, never exponents or runs of zeros
    assert "Caveats: energy and power are estimated" in summary and "1 trial(s) were flagged" in summary


def test_report_numbers_take_si_prefixes_instead_of_exponents_or_runs_of_zeros():
    from tokenwatt.common.measures import duration, si

    assert (si(0.2998, "Wh"), si(8.994e-05, "EUR"), si(1.5e4, "J"), si(0.0, "J")) == (
        "299.8 mWh",
        "0.08994 mEUR",  # money stops at milli: a reader prices in mEUR, not µEUR (issue 58)
        "15.00 kJ",
        "0 J",
    )
    assert (duration(42.0), duration(210.0), duration(9000.0)) == ("42.0 s", "3.5 min", "2.5 h")


def test_generated_sentences_have_no_doubled_punctuation(analysed, figures):
    import re

    text = re.sub(r"<[^>]+>", "", _report(analysed, figures))
    assert ".)." not in text and ".." not in text.replace("...", "")


def test_the_provenance_names_the_training_stack(analysed, figures):
    page = _report(analysed, figures)
    assert '<td class="l">training stack</td><td class="">native</td>' in page


def test_a_barely_loaded_device_gets_a_warning_that_energy_is_mostly_idle_power(analysed, figures):
    assert "barely loaded" not in _report(analysed, figures)  # 32 W in training over a 1-W idle baseline
    trials, *rest = analysed
    idle_like = trials.with_columns((pl.col("power_mean_w") * 0.98).alias("idle_power_w"))
    assert "The device was barely loaded</b>: training's mean power was +2.0 % off the idle baseline" in _report(
        (idle_like, *rest), figures
    )


@pytest.mark.parametrize(
    "basis,words", [("training", "carries the ratio of their matmul peaks"), ("fp32", "at one yardstick")]
)
def test_the_report_says_what_a_precision_comparison_of_pe_means_under_its_cs_basis(analysed, figures, basis, words):
    from tokenwatt.presentation.sections.quality import cs_basis_sentence

    assert words in cs_basis_sentence(basis)


MODELS = {"tiny": 84_128, "small": 330_000, "base": 1_300_000}


@pytest.fixture(scope="module")
def factorial_page():
    """The report of a 3 model sizes × 3 budgets study (the shape of config/model-size.yaml), 3 trials each, with
    the effects real data has: loss falling with budget and size, energy growing with both, multiplicative noise."""
    rng = np.random.default_rng(3)
    records, expected = [], []
    for t in range(1, 4):
        for k, (model, params) in enumerate(MODELS.items()):
            for i, b in enumerate(BUDGETS):
                train_s = 5.0 * 2**i * 1.8**k * rng.lognormal(0, 0.05)
                power = 32 * rng.lognormal(0, 0.02)
                cell = f"model={model}/b{b}"
                records.append(
                    raw_record(
                        b,
                        t,
                        cell=cell,
                        levels={"model": model},
                        params=params,
                        eval_loss=2.9 - 0.35 * i - 0.1 * k + rng.normal(0, 0.03),
                        train_s=train_s,
                        duration_s=train_s,
                        power_rms_w=power,
                        power_mean_w=power,
                        energy_j=power * train_s,
                    )
                )
                expected.append((cell, t))
    trials, missing = aggregate(records, expected, cost={**COST, "electricity_price_per_kwh": 0.3}, intensity=400.0)
    conditions = conditions_table(trials)
    changes = changes_table(conditions)
    stats = stats_product(trials, False).data
    made = F.make_all(trials, conditions, changes, {}, True, "EUR")
    return render_report(
        ReportInputs(
            config={
                "study": {"name": "factorial", "budgets": BUDGETS, "trials": 3},
                "design": {"model": list(MODELS)},
                "cost": {"currency": "EUR"},
            },
            config_hash="abc123",
            trials=trials,
            conditions=conditions,
            changes=changes,
            products={"stats": stats},
            missing=missing,
            figures={k: (_png(f), f"caption of {k}") for k, f in made.items()},
            reference=json.loads(open("resources/reference_study.json").read()),
            data_summary={},
            profiles={"": PROFILE},
            cs={"": (0.15, "measured: device profile")},
            rerun=[],
            profile_check=[],
            cost={},
        )
    )


def test_a_factorial_study_gets_conditions_tables_as_wide_as_its_budgets_one_set_per_level(factorial_page):
    conditions = factorial_page.split("<h2>Conditions</h2>")[1].split("<h2>")[0]
    for model in MODELS:
        assert f"<h3>model {model}</h3>" in conditions or f"<h3>model={model}</h3>" in conditions
    for head in re.findall(r"<thead><tr>(.*?)</tr></thead>", conditions):
        assert head.count("<th") == 1 + len(BUDGETS)


def test_the_factorial_report_does_not_overflow_a_1300_px_page_in_chromium(factorial_page, tmp_path):
    probe = (
        "<script>window.addEventListener('load', () => { document.title = 'overflow=' + "
        "(document.documentElement.scrollWidth - document.documentElement.clientWidth); });</script>"
    )
    found = re.fullmatch(r"overflow=(-?\d+)", chromium_title(factorial_page, tmp_path, 1300, probe))
    assert found and int(found.group(1)) <= 0


def test_interaction_contrasts_give_t_to_two_decimals_and_whole_df_as_integers(factorial_page):
    section = factorial_page.split("<h3>Interaction contrasts</h3>")[1].split("</table>")[0]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", section)]
    rows = [c for c in cells if len(c) == 9]
    assert rows and all(re.fullmatch(r"-?\d+\.\d\d", c[5]) for c in rows) and all(c[6] == "2" for c in rows)


def test_every_product_names_a_section_module_with_its_template():
    import importlib
    from pathlib import Path

    from tokenwatt.analysis.products import PRODUCTS

    templates = Path(importlib.import_module("tokenwatt.presentation.templating").TEMPLATES)
    for p in PRODUCTS:
        module = importlib.import_module(f"tokenwatt.presentation.sections.{p.section}")
        assert callable(module.render) and (templates / "sections" / f"{p.section}.html.j2").is_file(), p.name


@pytest.mark.parametrize("selection", [False, True])
def test_the_sections_come_head_first_then_each_product_in_order_then_the_tail(selection):
    from tokenwatt.presentation.report import section_modules

    config = {"design": {"selection": {"strict": {}}}} if selection else {}
    names = [m.__name__.rsplit(".", 1)[1] for m in section_modules(config)]
    products = ["statistics", "curves", *(["selection"] if selection else []), "scaling"]
    assert names == ["summary", "warnings", "conditions", *products, "figures", "quality", "reference", "provenance"]


def test_the_page_shows_its_sections_in_the_reports_order(analysed, figures):
    headings = re.findall(r"<h2[^>]*>([^<]*)</h2>", _report(analysed, figures))
    assert headings == [
        "The answer",
        "Conditions",
        "Statistics",
        "Energy to quality",
        "Scaling",
        "Figures",
        "Measurement quality",
        "Against the reference study",
        "Provenance",
    ]


def test_a_template_escapes_data_as_the_tables_do(analysed, figures):
    page = _report(analysed, figures, missing=["""trial 3: "quoted" & 'single' <b>"""])
    assert "trial 3: &quot;quoted&quot; &amp; &#x27;single&#x27; &lt;b&gt;" in page  # html.escape's spelling


def test_quality_against_energy_leaves_out_points_whose_perplexity_is_past_a_floats_range():
    from curve_study import BUDGETS as CURVE_BUDGETS
    from curve_study import budget_study

    # a diverged run's loss is finite but past ~709 nats: its perplexity is no point on a log axis
    curves = budget_study(n=2, points=4, shift={(CURVE_BUDGETS[-1], 1): 1000.0})
    fig = F.quality_vs_energy(curves, estimated=False)
    fig.savefig(io.BytesIO(), format="png")
    drawn = [line for line in fig.axes[0].get_lines() if len(line.get_xdata())]
    assert len(drawn) == 2 * len(CURVE_BUDGETS) - 1
    assert max(float(np.max(line.get_ydata())) for line in drawn) < 1e3
