"""The energy-optimal frontier: at each training energy J, the model size N*, the tokens D* and the loss L* that
give the most quality for the joules, by three estimators on one joule axis.

Every point is one evaluation of one run: N parameters, D tokens trained so far, J its cumulative training energy,
its eval loss, and its trial id. A point may stand for its budget only where the run's learning rate did not
depend on where it stopped (a constant rate, or a schedule's own last step): the caller chooses such points
(``study._points_setting``), as Hoffmann et al. 2022 did.

1. ``envelope`` (Hoffmann et al.'s approach 1; McLeish et al. 2025 on checkpoints): the lower convex hull of
   (log J, loss) over every point, up to its lowest loss; the hull's vertices are the frontier's measured points,
   and N* and D* are power laws of J fitted by least squares in logs to the vertices on sizes between the smallest
   and the largest measured. L*(J) is the hull itself.
2. ``isoenergy`` (approach 2, read off training curves as Porian et al. 2024 did): at each J, each size's loss is
   read off its own points — per trial id, the best loss it had reached with at most J joules, interpolated
   linearly in log J between its record lows and held after the last one up to the run's last point, and averaged
   over the size's trial ids (a size enters only where every one of its trial ids covers J). The optimum in log N is
   the vertex of the parabola through the size with the lowest loss and its two neighbours; it needs 3 sizes, and a
   lowest loss at the smallest or largest size reaching J is refused (the optimum lies beyond them), never reported.
   D* is the tokens with which each size reached that loss, read the same way, interpolated in log N.
3. ``law`` (approach 3): L(N, D) fitted as ``scaling.fit_law`` fits it, e(N) from each run's end (its energy over its
   tokens) as ``energy_per_token``
   chooses it, and the optimum along e(N)·D = J as ``allocation`` finds it; refused where α or β is not identified.

Beside them, the survey's question without the law (``energy_vs_flop``): at each J, the iso-energy optimum N*_E, D*_E
trains C = f(N*_E)·D*_E FLOPs (f a size's FLOPs per token, from its points' C/D, interpolated in log N as D* is); the
same slices on the compute axis (each point's C) give the FLOP-optimal N*_C of that compute off the same points, and
N*_E / N*_C says whether this hardware's joules and its FLOPs pick different sizes; refused where either slice refuses,
so it is reported only inside the sizes and energies measured. How C is counted moves N*_C (6·N·D with N total
counts an untied input embedding's lookup as FLOPs): the caller names its convention.

Each estimator is refitted without each trial id and each model size (``units``: the design's units, never
the points), so every N*, D*, L* has a jackknife interval on the log scale; a refit that refuses leaves the
interval out, with why. Energies are those inside the points' measured range only; an estimate outside the sizes
measured is marked ``beyond_sizes``.

Whether the approaches agree is a test, not an overlap of intervals (``_agreement``): for each pair at each J, the
difference of their log N* with a jackknife interval over the same refits, each replicate the two approaches
refitted without one and the same unit, so what moves both with a unit cancels. Where that interval excludes 0 the
two contradict each other; where it holds 0 no contradiction is detected, which is said with the interval's width
(a factor exp(high − low)), never as agreement. A law in doubt (its lack-of-fit screen, coefficients not identified)
is left out of the comparison: approaches that agree with a wrong law would say nothing about the frontier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .allocation import allocate
from .energy_per_token import choose_energy
from .law import ScalingInputError, check_positive, fit_law
from .units import SIZE, TRIAL, interval_refusal, interval_units_note, leave_one_out, stack, unit_counts

APPROACHES = ("envelope", "isoenergy", "law")
QUANTITIES = ("n", "d", "loss")  # per energy: N*, D*, L*, all positive, so all intervals on the log scale
MIN_HULL_SIZES = 2  # a power law of N*(J) needs the frontier to pass through at least two sizes
MIN_HULL_VERTICES = 3
MIN_SLICE_SIZES = 3
ENERGIES = 7  # log-spaced energies across the measured range, where none are given


@dataclass(frozen=True)
class FrontierPoints:
    """One row per evaluation point: N parameters, D tokens so far, J cumulative training energy (J), eval loss
    (nats), the trial id the point belongs to (its seed and data subset, shared across sizes), and C its training
    FLOPs so far (6·N·D unless counted otherwise: ``energy_vs_flop``'s compute axis)."""

    N: np.ndarray
    D: np.ndarray
    J: np.ndarray
    loss: np.ndarray
    trial: np.ndarray
    C: np.ndarray

    @classmethod
    def of(
        cls,
        N: ArrayLike,
        D: ArrayLike,
        J: ArrayLike,
        loss: ArrayLike,
        trial: ArrayLike | None = None,
        flops: ArrayLike | None = None,
    ):
        """Checked points: positive finite numbers of one length (ScalingInputError naming the column if not);
        without ``trial`` every point is one trial id, without ``flops`` each point's compute is 6·N·D."""
        N, D, J, loss = (check_positive(v, name) for v, name in ((N, "N"), (D, "D"), (J, "energy"), (loss, "loss")))
        if N.size == 0:
            raise ScalingInputError("no points: the frontier needs at least one evaluation point per run")
        trial = np.zeros(N.size, int) if trial is None else np.asarray(trial).ravel()
        C = 6.0 * N * D if flops is None else check_positive(flops, "flops")
        if not N.size == D.size == J.size == loss.size == trial.size == C.size:
            raise ScalingInputError(
                f"N, D, energy, loss, trial and flops differ in length: {N.size}, {D.size}, {J.size}, {loss.size}, "
                f"{trial.size}, {C.size}"
            )
        return cls(N, D, J, loss, trial, C)

    def keep(self, rows: np.ndarray) -> FrontierPoints:
        return FrontierPoints(self.N[rows], self.D[rows], self.J[rows], self.loss[rows], self.trial[rows], self.C[rows])

    @property
    def units(self) -> dict[str, np.ndarray]:
        return {TRIAL: self.trial, SIZE: self.N}


@dataclass(frozen=True)
class Estimate:
    """One approach at each energy: N*, D*, L* (NaN where it refuses) and why it refuses there (None where it
    does not); ``details`` what the approach fitted, for the JSON."""

    n: np.ndarray
    d: np.ndarray
    loss: np.ndarray
    why: list[str | None]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def row(self) -> np.ndarray:
        return np.concatenate([self.n, self.d, self.loss])


def _refused(energies: np.ndarray, why: str, details: dict[str, Any] | None = None) -> Estimate:
    nan = np.full(energies.size, np.nan)
    return Estimate(nan, nan.copy(), nan.copy(), [why] * energies.size, details or {})


# ---------------------------------------------------------------- approach 1: the lower envelope
def lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of (x, y) from the leftmost point to the lowest y (the part where more x
    buys lower y), by Andrew's monotone chain; of points with equal x, the lowest."""
    order = np.lexsort((y, x))
    hull: list[int] = []
    for i in order:
        if hull and x[hull[-1]] == x[i]:
            continue  # the same x, a higher y: never on the lower hull
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            if (x[a] - x[o]) * (y[i] - y[o]) - (y[a] - y[o]) * (x[i] - x[o]) <= 0:
                hull.pop()  # a lies on or above the segment from o to i
            else:
                break
        hull.append(int(i))
    lowest = int(np.argmin([y[i] for i in hull]))
    return np.array(hull[: lowest + 1], int)


def envelope(points: FrontierPoints, energies: np.ndarray) -> Estimate:
    """Approach 1 (module docstring). Vertices on the smallest or largest size measured are left out of the power
    laws: where the frontier runs along an edge size the optimum may lie beyond it, and such stretches flatten
    N*(J) (on a noise-free ladder of 7 sizes they halved its exponent)."""
    x = np.log(points.J)
    hull = lower_hull(x, points.loss)
    edge = np.isin(points.N[hull], (points.N.min(), points.N.max()))
    inner = hull[~edge]
    sizes = np.unique(points.N[inner])
    details = {
        "vertices": int(hull.size),
        "vertices_on_edge_sizes": int(edge.sum()),
        "sizes_on_frontier": np.unique(points.N[hull]).tolist(),
    }
    if inner.size < MIN_HULL_VERTICES or sizes.size < MIN_HULL_SIZES:
        return _refused(
            energies,
            f"the lower envelope has {inner.size} vertices on {sizes.size} model size(s) between the smallest and the "
            f"largest: power laws of N*(J) and D*(J) need {MIN_HULL_VERTICES} vertices on at least {MIN_HULL_SIZES} "
            "such sizes",
            details,
        )
    hx = x[inner]
    a_n, c_n = np.polyfit(hx, np.log(points.N[inner]), 1)
    a_d, c_d = np.polyfit(hx, np.log(points.D[inner]), 1)
    u = np.log(energies)
    inside = (u >= hx[0]) & (u <= hx[-1])
    why = [
        None
        if ok
        else f"outside the energies where the envelope runs through inner sizes ({np.exp(hx[0]):.4g}–{np.exp(hx[-1]):.4g} J)"
        for ok in inside
    ]
    n = np.where(inside, np.exp(c_n + a_n * u), np.nan)
    d = np.where(inside, np.exp(c_d + a_d * u), np.nan)
    loss = np.where(inside, np.interp(u, x[hull], points.loss[hull]), np.nan)
    return Estimate(n, d, loss, why, {**details, "n_exponent": float(a_n), "d_exponent": float(a_d)})


# ---------------------------------------------------------------- approach 2: iso-energy slices
def _record_lows(J: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices, in order of J, of the points whose loss is lower than every point with less energy: the best a run
    had reached with at most that many joules."""
    order = np.argsort(J, kind="stable")
    best, keep = np.inf, []
    for i in order:
        if y[i] < best:
            best = y[i]
            keep.append(int(i))
    return np.array(keep, int)


def _size_at(points: FrontierPoints, rows: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One size's loss and log D at each log energy u: per trial id, its best loss so far interpolated between its
    record lows and held after the last one up to its last point (a run that levels off still reaches u), with the D
    of that loss read the same way (the tokens that reached it); averaged over its trial ids; NaN where any trial id's
    points do not reach u."""
    losses, log_ds = [], []
    for t in np.unique(points.trial[rows]):
        mine = rows[points.trial[rows] == t]
        lows = mine[_record_lows(points.J[mine], points.loss[mine])]
        every = mine[np.argsort(points.J[mine], kind="stable")]
        ux, reach = np.log(points.J[lows]), np.log(points.J[every])
        covered = (u >= reach[0]) & (u <= reach[-1])
        losses.append(np.where(covered, np.interp(u, ux, points.loss[lows]), np.nan))
        log_ds.append(np.where(covered, np.interp(u, ux, np.log(points.D[lows])), np.nan))
    return np.mean(losses, axis=0), np.mean(log_ds, axis=0)


def _vertex(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The vertex (x, y) of the parabola through three points whose middle one is strictly the lowest."""
    c2, c1, c0 = np.polyfit(x, y, 2)
    xv = -c1 / (2 * c2)
    return float(xv), float(c0 + c1 * xv + c2 * xv**2)


def isoenergy(points: FrontierPoints, energies: np.ndarray) -> Estimate:
    """Approach 2 (module docstring)."""
    sizes = np.unique(points.N)
    u = np.log(energies)
    read = [_size_at(points, np.flatnonzero(points.N == s), u) for s in sizes]
    loss_at = np.array([r[0] for r in read])  # sizes × energies
    log_d_at = np.array([r[1] for r in read])
    n, d, best = (np.full(energies.size, np.nan) for _ in range(3))
    why: list[str | None] = []
    slices = []
    for j in range(energies.size):
        there = np.flatnonzero(np.isfinite(loss_at[:, j]))
        slices.append([float(s) for s in sizes[there]])
        if there.size < MIN_SLICE_SIZES:
            why.append(f"{there.size} model size(s) reach this energy: an iso-energy optimum needs {MIN_SLICE_SIZES}")
            continue
        k = int(np.argmin(loss_at[there, j]))
        if k in (0, there.size - 1):
            edge = "smallest" if k == 0 else "largest"
            why.append(
                f"the lowest loss at this energy is the {edge} size reaching it (N = {sizes[there[k]]:.4g}): the "
                "optimum lies beyond the sizes measured there"
            )
            continue
        three = there[k - 1 : k + 2]
        if not loss_at[three[1], j] < min(loss_at[three[0], j], loss_at[three[2], j]):
            why.append("the lowest loss at this energy is shared by neighbouring sizes: no single optimum")
            continue
        xv, yv = _vertex(np.log(sizes[three]), loss_at[three, j])
        n[j], best[j] = np.exp(xv), yv
        d[j] = np.exp(np.interp(xv, np.log(sizes[there]), log_d_at[there, j]))
        why.append(None)
    return Estimate(n, d, best, why, {"sizes_per_energy": slices})


# ---------------------------------------------------------------- approach 3: the law with e(N)
def _run_ends(points: FrontierPoints) -> np.ndarray:
    """Per model size and trial id, the point with the most tokens: a run's end, whose energy over tokens is the run's
    joules per token, as the allocation's e(N) takes it (earlier points carry more of the start-up's share)."""
    codes = np.unique(points.trial, return_inverse=True)[1]
    ends = {}
    for i in np.lexsort((points.D, codes, points.N)):  # by size, trial id, then tokens: the last of each wins
        ends[(points.N[i], codes[i])] = int(i)
    return np.array(sorted(ends.values()))


def law(points: FrontierPoints, energies: np.ndarray) -> Estimate:
    """Approach 3 (module docstring)."""
    ends = _run_ends(points)
    try:
        fit = fit_law(points.N, points.D, points.loss)
        cost = choose_energy(points.N[ends], points.J[ends] / points.D[ends])
    except ScalingInputError as err:
        return _refused(energies, f"the law or e(N) cannot be fitted: {err}")
    details = {
        "law": {k: fit.to_dict()[k] for k in ("E", "A", "B", "alpha", "beta")},
        "not_identified": sorted(fit.not_identified),
        "energy_model": cost.chosen,
    }
    if unpinned := [k for k in ("alpha", "beta") if k in fit.not_identified]:
        return _refused(
            energies, "; ".join(f"{k} is not identified ({fit.not_identified[k]})" for k in unpinned), details
        )
    got = allocate(fit, cost.model, energies)
    why = [None if np.isfinite(v) else "the law has no finite optimum along this energy" for v in got.N]
    return Estimate(got.N, got.D, got.loss, why, details)


ESTIMATORS: dict[str, Callable[[FrontierPoints, np.ndarray], Estimate]] = {
    "envelope": envelope,
    "isoenergy": isoenergy,
    "law": law,
}


# ---------------------------------------------------------------- intervals and agreement
def _rows(
    estimate: Callable[[FrontierPoints], np.ndarray],
    points: FrontierPoints,
    without: Callable[[str, Any], FrontierPoints] | None,
) -> tuple[dict[str, int], str | None, dict[str, list]]:
    """The units, why there is no interval (or None), and per dimension ``estimate``'s row refitted without each
    unit (``without``: the points chosen again without a unit, where choosing them looked at the data)."""
    counts = unit_counts(points.units)
    refused = interval_refusal(counts)
    if refused:
        return counts, refused, {}

    def refit(dim: str, unit: Any, keep: np.ndarray) -> np.ndarray:
        return estimate(without(dim, unit) if without else points.keep(keep))

    return counts, None, {d: [r for _, r in reps] for d, reps in leave_one_out(points.units, refit).items()}


def _joint_row(points: FrontierPoints, energies: np.ndarray) -> np.ndarray:
    """Every approach's row, in the order of APPROACHES: one refit per deleted unit gives all three, so the
    approaches' replicates pair up by unit (the agreement test's interval needs that)."""
    return np.concatenate([ESTIMATORS[name](points, energies).row for name in APPROACHES])


def _part(replicates: Mapping[str, list], index: int, width: int) -> dict[str, list]:
    """One approach's slice of each joint replicate row (None stays None: a refit that failed)."""
    return {
        d: [None if r is None else np.asarray(r)[index * width : (index + 1) * width] for r in reps]
        for d, reps in replicates.items()
    }


def _approach(
    est: Estimate,
    counts: dict[str, int],
    refused: str | None,
    replicates: Mapping[str, list],
    points: FrontierPoints,
    energies: np.ndarray,
) -> dict[str, Any]:
    """One approach's estimate and intervals, per energy in the JSON form of ``fit_frontier.py``."""
    names = tuple(f"{q}[{j}]" for q in QUANTITIES for j in range(energies.size))
    jack = stack(names, est.row, np.ones(len(names), bool), replicates) if replicates else None
    lo_size, hi_size = float(points.N.min()), float(points.N.max())
    lo_tokens, hi_tokens = float(points.D.min()), float(points.D.max())
    rows = []
    for j, energy in enumerate(energies):
        row: dict[str, Any] = {"energy_j": float(energy)}
        for q_index, q in enumerate(QUANTITIES):
            value = float(est.row[q_index * energies.size + j])
            row[f"{q}_opt"] = value if np.isfinite(value) else None
            iv = jack.interval(q_index * energies.size + j) if jack and np.isfinite(value) else None
            row[f"{q}_low"], row[f"{q}_high"] = (iv["ci_low"], iv["ci_high"]) if iv else (None, None)
            if q == "n":
                row["interval_why"] = (
                    None if iv and iv["why"] is None else (iv["why"] if iv else (refused or "no estimate"))
                )
        row["why"] = est.why[j]
        row["beyond_sizes"] = None if row["n_opt"] is None else not lo_size <= row["n_opt"] <= hi_size
        row["beyond_tokens"] = None if row["d_opt"] is None else not lo_tokens <= row["d_opt"] <= hi_tokens
        rows.append(row)
    return {
        "estimates": rows,
        "details": est.details,
        "intervals": refused or interval_units_note(counts),
    }


def _energy_vs_flop_row(points: FrontierPoints, energies: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
    """Per energy: the compute the iso-energy optimum trains, the iso-energy optimum N*_E, the iso-FLOP optimum N*_C
    at that compute, and N*_E / N*_C (NaN where either slice refuses), as one row [compute…, n_energy…, n_flop…,
    ratio…]; with why each refuses."""
    by_energy = isoenergy(points, energies)
    sizes = np.unique(points.N)
    per_token = np.array([np.median(points.C[points.N == s] / points.D[points.N == s]) for s in sizes])
    f = np.exp(np.interp(np.log(by_energy.n), np.log(sizes), np.log(per_token)))  # NaN where no optimum
    compute = f * by_energy.d
    flops = FrontierPoints(points.N, points.D, points.C, points.loss, points.trial, points.C)
    found = np.isfinite(compute)
    by_flops = isoenergy(flops, np.where(found, compute, 1.0))  # 1 FLOP where there is no compute: read, not used
    n_flop = np.where(found, by_flops.n, np.nan)
    why = [
        f"no iso-energy optimum ({e})" if e else (f"no iso-FLOP optimum at its compute ({c})" if c else None)
        for e, c in zip(by_energy.why, by_flops.why)
    ]
    return np.concatenate([compute, by_energy.n, n_flop, by_energy.n / n_flop]), why


def energy_vs_flop(
    points: FrontierPoints,
    energies: np.ndarray,
    without: Callable[[str, Any], FrontierPoints] | None = None,
    flops: str = "6ND",
) -> dict[str, Any]:
    """The energy- against the FLOP-optimal size at each energy, read off the points by the slices (module
    docstring), each with its jackknife interval over the same units as the approaches'; ``flops`` names how the
    points' compute was counted."""
    row, why = _energy_vs_flop_row(points, energies)
    counts, refused, replicates = _rows(lambda p: _energy_vs_flop_row(p, energies)[0], points, without)
    k = energies.size
    quantities = ("compute_flop", "n_energy", "n_flop", "ratio")
    names = tuple(f"{q}[{j}]" for q in quantities for j in range(k))
    jack = stack(names, row, np.ones(len(names), bool), replicates) if replicates else None
    rows = []
    for j, energy in enumerate(energies):
        values = {q: float(row[i * k + j]) for i, q in enumerate(quantities)}
        out: dict[str, Any] = {
            "energy_j": float(energy),
            **{q: v if np.isfinite(v) else None for q, v in values.items()},
        }
        for q, offset in (("n_flop", 2 * k), ("ratio", 3 * k)):
            iv = jack.interval(offset + j) if jack and np.isfinite(row[offset + j]) else None
            out[f"{q}_low"], out[f"{q}_high"] = (iv["ci_low"], iv["ci_high"]) if iv else (None, None)
            if q == "ratio":
                out["interval_why"] = None if iv and iv["why"] is None else (iv["why"] if iv else refused or why[j])
        low, high = out["ratio_low"], out["ratio_high"]
        out["excludes_one"] = None if low is None else bool(high < 1 or low > 1)
        out["why"] = why[j]
        rows.append(out)
    return {
        "approach": "isoenergy",
        "flops": flops,
        "estimates": rows,
        "intervals": refused or interval_units_note(counts),
    }


PAIRS = tuple(combinations(APPROACHES, 2))


def _pair_ratios(row: ArrayLike, k: int) -> np.ndarray:
    """N*_a / N*_b of every pair (PAIRS) at each of k energies, from a joint row (NaN where either has no N*)."""
    row, width = np.asarray(row, float), len(QUANTITIES) * k
    n = {name: row[i * width : i * width + k] for i, name in enumerate(APPROACHES)}  # N* leads each approach's row
    return np.concatenate([n[a] / n[b] for a, b in PAIRS])


def _factor(width: float) -> str:
    return f"{width:.3g}" if width < 1000 else f"{width:,.0f}"


def _pair_test(a: str, b: str, iv: dict[str, Any] | None, why: str | None) -> dict[str, Any]:
    """One pair at one energy: log N*_a − log N*_b, its paired 95 % interval, its width as a factor, and the verdict:
    "contradict" where the interval excludes 0; where it holds 0, only that no contradiction was detected, with the
    width that says how large a difference could have gone unseen."""
    out: dict[str, Any] = {"approaches": [a, b], "log_difference": None, "log_low": None, "log_high": None}
    out |= {"width_factor": None, "contradict": None, "verdict": None, "why": why}
    if iv is None:
        return out
    out["log_difference"] = float(np.log(iv["estimate"]))
    if iv["ci_low"] is None:
        return {**out, "why": f"no paired interval: {iv['why']}"}
    low, high = float(np.log(iv["ci_low"])), float(np.log(iv["ci_high"]))
    width = float(iv["ci_high"] / iv["ci_low"])  # exp(high − low), without rounding the logs twice
    contradict = low > 0 or high < 0
    verdict = "contradict" if contradict else f"no contradiction detected (intervals ×{_factor(width)} wide)"
    return {
        **out,
        "log_low": low,
        "log_high": high,
        "width_factor": width,
        "contradict": contradict,
        "verdict": verdict,
    }


def _agreement(
    estimates: Mapping[str, Estimate],
    replicates: Mapping[str, list],
    energies: np.ndarray,
    doubts: Mapping[str, str | None],
    refused: str | None,
) -> list[dict[str, Any]]:
    """Per energy, each pair of approaches not in doubt, tested (module docstring): the difference of their log N*
    with a jackknife interval whose replicates pair up by deleted unit (``replicates``: joint rows, ``_joint_row``).
    Overlapping intervals are no test: two approaches that move together over the units overlap however far apart
    they sit, and on misspecified laws that overlap was read as agreement almost always."""
    k = energies.size
    ratios = _pair_ratios(np.concatenate([estimates[name].row for name in APPROACHES]), k)
    paired = {d: [None if r is None else _pair_ratios(r, k) for r in reps] for d, reps in replicates.items()}
    names = tuple(f"{a}/{b}[{j}]" for a, b in PAIRS for j in range(k))
    jack = stack(names, ratios, np.ones(len(names), bool), paired) if paired else None
    left_out = {
        name: f"the {name} is in doubt ({doubt}): left out of the comparison" for name, doubt in doubts.items() if doubt
    }
    out = []
    for j, energy in enumerate(energies):
        pairs = []
        for p, (a, b) in enumerate(PAIRS):
            if a in left_out or b in left_out:
                continue
            missing = [name for name in (a, b) if not np.isfinite(estimates[name].n[j])]
            why = f"no N* from {' or '.join(missing)}" if missing else None if jack else refused or "no units"
            pairs.append(_pair_test(a, b, None if why else jack.interval(p * k + j), why))
        tested = [t for t in pairs if t["contradict"] is not None]
        out.append(
            {
                "energy_j": float(energy),
                "pairs": pairs,
                "left_out": left_out,
                "contradict": any(t["contradict"] for t in tested) if tested else None,
                "why": None
                if tested
                else "no pair tested: " + "; ".join(f"{'–'.join(t['approaches'])}: {t['why']}" for t in pairs),
            }
        )
    return out


def default_energies(points: FrontierPoints, count: int = ENERGIES) -> np.ndarray:
    """``count`` log-spaced energies from the smallest to the largest measured."""
    return np.geomspace(points.J.min(), points.J.max(), count)


def frontier(
    points: FrontierPoints,
    energies: ArrayLike | None = None,
    without: Callable[[str, Any], FrontierPoints] | None = None,
    law_doubt: str | None = None,
    flops: str = "6ND",
) -> dict[str, Any]:
    """The three approaches at each energy, with intervals and the test of their agreement; energies outside the points'
    measured range are refused (ScalingInputError) rather than extrapolated to. ``law_doubt``: why the law itself is
    in doubt (its lack-of-fit screen, which the caller runs), said beside the law's column with any of E, A, B the
    fit does not identify; ``flops``: how the points' compute (``FrontierPoints.C``) was counted."""
    energies = default_energies(points) if energies is None else check_positive(energies, "energies")
    lo, hi = float(points.J.min()), float(points.J.max())
    if outside := [float(e) for e in energies if not lo <= e <= hi]:
        raise ScalingInputError(
            f"energies {', '.join(f'{e:.4g}' for e in outside)} J lie outside the points' measured energies "
            f"({lo:.4g}–{hi:.4g} J): the frontier is reported only where it was measured"
        )
    estimates = {name: ESTIMATORS[name](points, energies) for name in APPROACHES}
    counts, refused, replicates = _rows(lambda p: _joint_row(p, energies), points, without)
    width = len(QUANTITIES) * energies.size
    approaches = {
        name: _approach(estimates[name], counts, refused, _part(replicates, i, width), points, energies)
        for i, name in enumerate(APPROACHES)
    }
    unpinned = [k for k in ("E", "A", "B") if k in estimates["law"].details.get("not_identified", [])]
    law_doubts = [law_doubt] * bool(law_doubt) + [f"{', '.join(unpinned)} not identified"] * bool(unpinned)
    doubts = {name: "; ".join(law_doubts) if name == "law" and law_doubts else None for name in APPROACHES}
    for name, approach in approaches.items():
        approach["doubt"] = doubts[name]
    return {
        "energies_j": energies.tolist(),
        "measured_energy_j": [lo, hi],
        "measured_sizes": [float(points.N.min()), float(points.N.max())],
        "approaches": approaches,
        "agreement": _agreement(estimates, replicates, energies, doubts, refused),
        "energy_vs_flop": energy_vs_flop(points, energies, without, flops),
    }
