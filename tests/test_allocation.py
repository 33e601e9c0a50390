"""The allocation a law implies under a budget: numeric along the budget curve, for either form of e(N)."""

import numpy as np
import pytest
from tokenwatt.analysis.scaling.allocation import allocate, optimum
from tokenwatt.analysis.scaling.energy_per_token import FLOPS_PER_TOKEN, PerToken
from tokenwatt.analysis.scaling.law import Law

TRUTH = Law(E=1.8, A=120.0, B=40.0, alpha=0.34, beta=0.28)
POWER = PerToken("power", 2e-9, 0.8)
AFFINE = PerToken("affine", 4e-5, 2e-10)


def brute_force_on_curve(law, cost, budget):
    """min L over 200 001 log-spaced N from 1e2 to 1e14, each with the D that spends the whole budget."""
    N = np.logspace(2, 14, 200_001)
    D = budget / cost(N)
    L = law.loss(N, D)
    i = L.argmin()
    assert 0 < i < N.size - 1  # an interior minimum, not the edge of the search
    return N[i], D[i], L[i]


@pytest.mark.parametrize("cost", [POWER, AFFINE], ids=["power", "affine"])
def test_the_allocation_matches_brute_force_along_the_budget_curve(cost):
    joules = np.array([1e2, 1e4, 1e6])
    alloc = allocate(TRUTH, cost, joules)
    for j, n, d, loss in zip(joules, alloc.N, alloc.D, alloc.loss, strict=True):
        bn, bd, bl = brute_force_on_curve(TRUTH, cost, j)
        assert n == pytest.approx(bn, rel=1e-3) and d == pytest.approx(bd, rel=1e-3)
        assert loss <= bl and loss == pytest.approx(bl, rel=1e-9)
        assert cost(n) * d == pytest.approx(j)


def test_a_power_law_allocation_equals_the_closed_form():
    """N* = (α A / (γ β B))^{1/(α+γβ)} · (J/c)^{β/(α+γβ)} (the scaling module's docstring)."""
    J = np.array([1e3, 1e5, 1e7])
    a, b, g = TRUTH.alpha, TRUTH.beta, POWER.p1
    p = a + g * b
    closed = (a * TRUTH.A / (g * b * TRUTH.B)) ** (1 / p) * (J / POWER.p0) ** (b / p)
    np.testing.assert_allclose(allocate(TRUTH, POWER, J).N, closed, rtol=1e-8)


def test_the_flops_allocation_is_hoffmanns_closed_form():
    flops = np.array([1e15, 1e18, 1e21])
    alloc = allocate(TRUTH, FLOPS_PER_TOKEN, flops, "flops")
    G = (TRUTH.alpha * TRUTH.A / (TRUTH.beta * TRUTH.B)) ** (1 / (TRUTH.alpha + TRUTH.beta))
    np.testing.assert_allclose(alloc.N, G * (flops / 6) ** TRUTH.a, rtol=1e-8)
    np.testing.assert_allclose(alloc.tokens_per_parameter, alloc.D / alloc.N)


def test_no_point_of_an_nd_grid_within_the_budget_beats_the_allocation():
    """The constraint binds: over a 2000 × 2000 (N, D) grid, no point that spends at most J has a lower loss."""
    alloc = allocate(TRUTH, AFFINE, [1e5])
    gN, gD = np.meshgrid(np.logspace(2, 9, 2000), np.logspace(3, 11, 2000), indexing="ij")
    best = TRUTH.loss(gN, gD)[AFFINE(gN) * gD <= 1e5].min()
    assert alloc.loss[0] <= best < alloc.loss[0] + 5e-3


@pytest.mark.parametrize(
    "law, cost",
    [
        (Law(1.8, 120.0, 40.0, -0.1, 0.28), POWER),
        (Law(1.8, 120.0, 40.0, 0.34, 0.0), POWER),
        (TRUTH, PerToken("power", 1e-6, -0.1)),
        (TRUTH, PerToken("affine", 1e-6, 0.0)),
    ],
    ids=["alpha<=0", "beta=0", "energy-falls-with-N", "energy-flat-in-N"],
)
def test_without_a_finite_optimum_the_allocation_is_nan_not_an_edge_of_the_search(law, cost):
    assert np.isnan(optimum(law, cost, 1e6)).all()


def test_budgets_outside_the_measured_range_are_marked_extrapolated():
    alloc = allocate(TRUTH, FLOPS_PER_TOKEN, [1e8, 6 * 1e6 * 4e6, 1e20], "flops", ((5e4, 5e6), (1e5, 1e7)))
    assert alloc.extrapolated.tolist() == [True, False, True]
    assert allocate(TRUTH, FLOPS_PER_TOKEN, [1e18]).extrapolated is None
