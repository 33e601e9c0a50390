"""The Scaling section's figures: drawn from the scaling product's outputs alone (its JSON and its tables of the points
it was fitted to), extrapolation marked, a sentence when unfitted."""

import numpy as np
import polars as pl
import pytest
from test_scaling_study import QUICK, _study
from tokenwatt.analysis.products import product
from tokenwatt.analysis.scaling.study import analyse_scaling, fitted_points, points
from tokenwatt.analysis.tables import read_product_table
from tokenwatt.common.files import write_csv
from tokenwatt.presentation.scaling_figures import draw, frontier

SCALING_FIGURES = list(product("scaling").figures)

# One worker computes the module's fitted study once (a module fixture is per worker).
pytestmark = pytest.mark.xdist_group("test_scaling_figures")


@pytest.fixture(scope="module")
def drawn():
    curves, trials = _study()
    scaling = analyse_scaling(curves, trials, QUICK)
    return scaling, draw(scaling, fitted_points(curves, trials, scaling["points"]), estimated=False)


def _texts(fig) -> str:
    return (
        " ".join(
            t.get_text()
            for ax in fig.axes
            for t in [ax.title, *ax.texts, *(ax.get_legend().get_texts() if ax.get_legend() else [])]
        )
        + " "
        + (fig._suptitle.get_text() if fig._suptitle else "")
    )


def test_every_scaling_figure_is_drawn_for_a_fitted_study(drawn):
    _, made = drawn
    assert list(made) == SCALING_FIGURES
    assert all(fig.axes[0].get_xscale() == "log" for fig in made.values())


def test_the_loss_figure_draws_one_fitted_curve_per_model_size_through_its_points(drawn):
    scaling, made = drawn
    ax = made["scaling_loss"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(label.startswith("N = ") for label in labels) == 4
    law = scaling["law_total"]
    solid = next(line for line in ax.get_lines() if line.get_label() == labels[0])
    D, L = solid.get_xdata(), solid.get_ydata()
    inside = np.isfinite(L)
    assert D[inside].min() >= law["D_range"][0] and D[inside].max() <= law["D_range"][1]


def test_the_frontier_draws_extrapolated_budgets_dashed_and_measured_ones_solid(drawn):
    scaling, _ = drawn
    alloc = dict(scaling["allocation_energy"])
    extrapolated = np.arange(len(alloc["budget"])) >= 5  # the largest budgets beyond the measured range
    alloc["extrapolated"] = extrapolated.tolist()
    fig = frontier(alloc, scaling["allocation_flops"])
    ax = fig.axes[0]
    solid = next(line for line in ax.get_lines() if line.get_label() == "N* (parameters)")
    assert np.array_equal(np.isfinite(solid.get_ydata()), ~extrapolated)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert dashed and all(np.isfinite(line.get_ydata())[extrapolated].all() for line in dashed)
    assert all(not np.isfinite(line.get_ydata())[:4].any() for line in dashed)  # measured budgets stay solid only
    assert "extrapolated" in _texts(fig)


def test_the_contours_draw_one_iso_energy_line_per_budget(drawn):
    scaling, made = drawn
    ax = made["scaling_contours"].axes[0]
    white = [line for line in ax.get_lines() if line.get_color() == "white"]
    assert len(white) == len(scaling["allocation_energy"]["budget"])


def test_an_unfitted_study_gets_every_figure_saying_why():
    curves, trials = _study()
    few = trials.filter(pl.col("params") < 1_000_000)
    scaling = analyse_scaling(curves, few, {})
    made = draw(scaling, fitted_points(curves, few, scaling["points"]), estimated=False)
    assert list(made) == SCALING_FIGURES
    assert all("at least 3 model sizes" in _texts(fig) for fig in made.values())


def test_the_points_the_figures_draw_are_the_fits_and_come_back_from_their_csv_unchanged(tmp_path):
    curves, trials = _study()
    scaling = analyse_scaling(curves, trials, QUICK)
    tables = fitted_points(curves, trials, scaling["points"])
    assert tables["scaling_points"].equals(points(curves, trials, scaling["points"]))  # no sweep here: every trial
    for name, table in tables.items():
        write_csv(tmp_path / f"{name}.csv", table)
        assert read_product_table(tmp_path / f"{name}.csv", name).equals(table)


def test_a_degenerate_law_a_float_power_overflows_on_is_drawn_from_its_terms_logs():
    """A fit that makes the size term a step (A ~ 5e260, alpha ~ 64: named not identified) once crashed the figures
    with an OverflowError in N ** alpha."""
    from tokenwatt.presentation.scaling_figures import _law

    law = {"E": 3.9, "A": 5.4e260, "alpha": 64.2, "B": 51.4, "beta": 0.67}
    got = _law(law, 36_000.0, np.array([1e4, 1e5]))
    expected = 3.9 + np.exp(np.log(5.4e260) - 64.2 * np.log(36_000.0)) + 51.4 / np.array([1e4, 1e5]) ** 0.67
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_law_whose_coefficient_overflowed_past_a_float_gets_a_loss_figure_saying_so(drawn):
    """The tiny scaling study once fitted alpha ~ 435 (named not identified): A ~ e^(thousands) left the float range
    and the JSON holds null, on which the loss figure crashed the report."""
    scaling, _ = drawn
    curves, trials = _study()
    broken = {**scaling, "law_total": {**scaling["law_total"], "A": None}}
    made = draw(broken, fitted_points(curves, trials, scaling["points"]), estimated=False)
    assert list(made) == SCALING_FIGURES
    assert all("the law's A not finite" in _texts(made[name]) for name in ("scaling_loss", "scaling_contours"))
