"""No number hidden: at a 1 400-px window every scroll box of the report holds its content, a text cell wraps and a
number does not, and a refusal that rows repeat is said once, under its table."""

import functools
import html
import io
import json
import re

import curve_study
import matplotlib.pyplot as plt
import numpy as np
import pytest
from tokenwatt.analysis.conditions import changes_table, conditions_table
from tokenwatt.analysis.curves.censored import ABOVE, EXACT, paired_ratio
from tokenwatt.analysis.curves.summary import analyse_curves
from tokenwatt.analysis.stats import stats_product
from tokenwatt.presentation import figures as F
from tokenwatt.presentation.html import Footnote, table
from tokenwatt.presentation.inputs import ReportInputs
from tokenwatt.presentation.report import render_report
from trial_records import COST, QUALITY, aggregate, raw_record
from workflow_helpers import chromium_title

MODELS = {"tiny": 84_128, "small": 330_000}


def _refusal() -> str:
    """The analysis's own words for a pair of budgets it gives no ratio: too few trial ids crossed the target."""
    got = paired_ratio([1.0, 2.0, 2.0], [EXACT, ABOVE, ABOVE], [1.1, 2.0, 2.0], [EXACT, ABOVE, ABOVE])
    assert got.ratio is None and len(got.status) > 100
    return got.status


def _curves() -> dict:
    """The curves product of a 5-trial study in which every pair of budgets is refused its ratio, with the reason
    the analysis gives (one long sentence, repeated in every row of the energy-ratio table)."""
    product = analyse_curves(curve_study.budget_study(n=5), {})
    for r in product["energy_to_target_comparisons"]:
        r.update(ratio=None, ci95_low=None, ci95_high=None, p=None, p_holm=None, status=_refusal())
    return product


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    plt.close(fig)
    return buf.getvalue()


@functools.cache
def _page(factorial: bool) -> str:
    """The report of a study shaped like the default (one factor, the budget) or a factorial one (model size ×
    budget), measured by the CPU estimate and priced, as the shipped configs are."""
    models = MODELS if factorial else None
    rng = np.random.default_rng(1)
    records, expected = [], []
    levels = list((models or {"": 0}).items())
    for t in range(1, 6):
        for k, (model, params) in enumerate(levels):
            for i, b in enumerate(curve_study.BUDGETS):
                seconds = 5.0 * 2**i * 1.8**k * rng.lognormal(0, 0.05)
                power = 32.8 * rng.lognormal(0, 0.01)
                extra = {"cell": f"model={model}/b{b}", "levels": {"model": model}, "params": params} if model else {}
                records.append(
                    raw_record(
                        b,
                        t,
                        eval_loss=2.8 - 0.4 * i - 0.1 * k + rng.normal(0, 0.03),
                        train_s=seconds,
                        duration_s=seconds,
                        power_rms_w=power,
                        power_mean_w=power,
                        energy_j=power * seconds,
                        **extra,
                    )
                )
                expected.append((extra.get("cell", b), t))
    trials, missing = aggregate(
        records, expected, quality={**QUALITY, "min_samples": 10}, cost={**COST, "electricity_price_per_kwh": 0.3}
    )
    conditions = conditions_table(trials)
    changes = changes_table(conditions)
    made = F.make_all(trials, conditions, changes, {}, True, "EUR")
    study = {"name": "widths", "budgets": curve_study.BUDGETS, "trials": 5}
    return render_report(
        ReportInputs(
            config={
                "study": study,
                "cost": {"currency": "EUR"},
                **({"design": {"model": list(models)}} if models else {}),
            },
            config_hash="abc123",
            trials=trials,
            conditions=conditions,
            changes=changes,
            products={"stats": stats_product(trials, False).data, "curves": _curves()},
            missing=missing,
            figures={k: (_png(f), f"caption of {k}") for k, f in made.items()},
            reference=json.loads(open("resources/reference_study.json").read()),
            data_summary={"documents_in": 10, "documents_out": 9},
            profiles={"": None},
            cs={"": (0.15, "measured: device profile")},
            profile_check=[{"profile": "", "status": "ok", "reference": "the device profile", "reasons": []}],
        )
    )


# Every element that scrolls sideways (the page, each table's box, a <pre>): the ones whose content is wider than
# the box, named by the text just before them, so a failure says which table hides what.
PROBE = """<script>window.addEventListener('load', () => {
  const over = [];
  for (const el of document.querySelectorAll('*')) {
    const x = getComputedStyle(el).overflowX;
    if ((el === document.documentElement || x === 'auto' || x === 'scroll') && el.scrollWidth > el.clientWidth) {
      const before = el.previousElementSibling ? el.previousElementSibling.textContent.slice(0, 60) : el.tagName;
      over.push(before + ': ' + el.scrollWidth + ' px in ' + el.clientWidth);
    }
  }
  document.title = 'overflowing=' + JSON.stringify(over);
});</script>"""


def _overflowing(page: str, tmp_path) -> list[str]:
    """The scroll boxes of ``page`` wider than their box in headless Chromium at a 1 400-px window."""
    title = chromium_title(page, tmp_path, 1400, PROBE)
    assert title.startswith("overflowing="), title
    return json.loads(
        title.removeprefix("overflowing=").replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
    )


@pytest.mark.parametrize("factorial", [False, True], ids=["default", "factorial"])
def test_no_scroll_box_of_the_report_is_wider_than_its_box_at_1400_px(factorial, tmp_path):
    page = _page(factorial)
    assert "needs 3 with distinct differences" in page  # the refusal is in the page, under its table
    assert _overflowing(page, tmp_path) == []


def test_a_refusal_repeated_in_rows_is_a_marker_in_each_cell_and_one_sentence_under_the_table():
    why = _refusal()
    shown = table(
        ["pair", "ratio", "p"], [["b", Footnote("no ratio", why), "—"], ["c", Footnote("no ratio", why), "—"]]
    )
    assert shown.count("no ratio<sup") == 2 and shown.count(why) == 1
    assert shown.index("</table>") < shown.index(why)


def test_two_different_refusals_get_two_numbered_notes_in_the_order_the_rows_use_them():
    shown = table(
        ["pair", "ratio"], [["a", Footnote("no ratio", "first reason")], ["b", Footnote("no ratio", "second")]]
    )
    assert re.findall(r'<sup class="fn">(\d)</sup>', shown) == ["1", "2", "1", "2"]
    assert shown.index("first reason") < shown.index("second")


def test_a_long_text_cell_wraps_and_a_number_or_short_text_does_not():
    shown = table(["what", "value"], [["a", "a sentence that is longer than a number ever is in a cell"], ["b", 0.5]])
    cells = re.findall(r'<td class="([^"]*)">', shown)
    assert cells == ["l", "t", "l", ""]


def test_the_energy_ratio_table_shows_a_refused_pair_as_no_ratio_with_the_reason_once():
    page = _page(False)
    section = page[page.index("Energy to each target, larger budget over smaller") :]
    section = section[: section.index("<h3>")]
    rows = len(_curves()["energy_to_target_comparisons"])
    assert rows > 1 and section.count("no ratio<sup") == rows and section.count(html.escape(_refusal())) == 1
