"""Figures. Plotting only: nothing here samples or estimates.

No function here selects a matplotlib backend: figures show inline in Jupyter and in the user's
own backend elsewhere; the ``bayesldp`` command chooses the file backend (Agg) for itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def _pyplot():
    """``matplotlib.pyplot``, imported on first use (never choosing a backend)."""
    import matplotlib.pyplot as plt

    return plt


#: category labels longer than this are wrapped onto several lines
LABEL_WRAP = 24


def category_axis(ax, labels=None, k: int | None = None) -> None:
    """Tick every category on the x axis of ``ax`` (ticks at 0..K-1), readably.

    ``labels=None`` numbers the categories 0..K-1, one tick each (matplotlib's own locator
    would tick every other one); give ``k`` then.  Otherwise every category gets its tick and
    its label: labels longer than :data:`LABEL_WRAP` characters wrap onto several lines;
    labels longer than three characters (or more than 12 categories) are rotated 45 degrees
    (90 beyond 30 categories), anchored at their tick; the font shrinks as K grows.  Numbers
    stay horizontal up to 40 categories.  Call ``fig.tight_layout()`` afterwards so that the
    labels fit in the figure.  A ``$`` is shown as itself (escaped from matplotlib's mathtext).
    """
    import textwrap

    if labels is None:
        if k is None:
            from bayesldp.errors import InvalidInputError

            raise InvalidInputError(
                "category_axis: labels=None and k=None; give the K labels, or k (the number of "
                "categories) to number them 0..K-1"
            )
        size = 8 if k <= 20 else max(5, 8 - (k - 20) // 15)
        if k <= 40:
            ax.set_xticks(range(k), [str(x) for x in range(k)], fontsize=size)
        else:
            ax.set_xticks(range(k), [str(x) for x in range(k)], fontsize=size, rotation=90)
        ax.set_xlim(-0.6, k - 0.4)
        return
    labels = [str(label) for label in labels]
    k = len(labels) if k is None else k
    wrapped = [  # "$" escaped: "$3,000-$4,999" is text, not matplotlib's mathtext
        textwrap.fill(label, LABEL_WRAP, break_long_words=False).replace("$", r"\$")
        for label in labels
    ]
    longest = max(len(label) for label in labels)
    size = 8 if k <= 20 else max(5, 8 - (k - 20) // 15)
    if longest <= 3 and k <= 12:
        ax.set_xticks(range(k), wrapped, fontsize=size)
    else:
        rotation = 90 if k > 30 else 45
        ax.set_xticks(range(k), wrapped, fontsize=size, rotation=rotation, ha="right",
                      rotation_mode="anchor")  # fmt: skip
    ax.set_xlim(-0.6, k - 0.4)


#: marker of the i-th line or series of a figure (cycled): lines that coincide stay
#: distinguishable by their markers, and a figure printed in grey still reads
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "*")
#: line styles cycled with the markers
LINESTYLES = ("-", "--", "-.", ":")


def legend_outside(ax, fontsize: float = 8, **kwargs):
    """The legend of ``ax`` to the right of its axes, where it covers no data.

    ``fig.tight_layout()`` (or ``bbox_inches="tight"`` when saving) makes room for it.
    """
    return ax.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=fontsize,
        **kwargs,
    )  # fmt: skip


def plot_estimates_vs_truth(
    truth, estimates: dict[str, tuple], ax=None, title: str = "", labels=None
):
    """Point estimates with intervals (lower, upper) per method against the truth.

    ``estimates`` maps a method's name to ``(point, lower, upper)`` arrays of length K;
    ``labels`` (K strings, optional) name the categories on the x axis (see
    :func:`category_axis`), which otherwise shows their numbers 0..K-1.
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=category_figsize(len(truth), labels))
    k = len(truth)
    x = np.arange(k)
    width = 0.8 / max(1, len(estimates))
    for i, (label, (point, lower, upper)) in enumerate(estimates.items()):
        offset = (i - (len(estimates) - 1) / 2) * width
        yerr = np.vstack([point - lower, upper - point])
        ax.errorbar(x + offset, point, yerr=yerr, fmt=MARKERS[i % len(MARKERS)], ms=4, capsize=2,
                    label=label)  # fmt: skip
    ax.hlines(truth, x - 0.45, x + 0.45, color="black", lw=1.5, label="truth", zorder=5)
    category_axis(ax, labels, k)
    ax.set_xlabel("category")
    ax.set_ylabel("frequency")
    ax.set_title(title)
    legend_outside(ax)
    return ax


def plot_density(
    posterior,
    mechanism,
    ax=None,
    prob: float = 0.9,
    estimates: dict[str, Any] | None = None,
    values=None,
    title: str = "",
):
    """The density of numerical data over the mechanism's bins, with the posterior band.

    ``posterior``: draws of ``theta`` (an InferenceData of :func:`bayesldp.fit`, or an array
    ``(..., k)``); drawn as the posterior mean density per bin (a step line) and the
    equal-tailed ``prob`` band of the draws, bin by bin.  ``estimates`` maps names to
    :class:`~bayesldp.Estimate` objects (or frequency vectors) drawn as further step lines;
    ``values`` (the true values, when known, as in a simulation) adds their histogram over the
    same bins.  The density of bin ``i`` is ``theta_i / width_i``
    (:func:`bayesldp.numerical.bin_density`).
    """
    from bayesldp.numerical import bin_density

    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 4.0))
    edges = mechanism.bin_edges
    draws = bin_density(posterior, mechanism)
    lower, upper = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2], axis=0)

    def steps(y):
        return np.append(y, y[-1])

    ax.fill_between(edges, steps(lower), steps(upper), step="post", alpha=0.3,
                    label=f"posterior {prob:.0%} band")  # fmt: skip
    ax.step(edges, steps(draws.mean(axis=0)), where="post", label="posterior mean")
    for name, est in (estimates or {}).items():
        ax.step(edges, steps(bin_density(est, mechanism)[0]), where="post", ls="--", label=name)
    if values is not None:
        hist, _ = np.histogram(np.asarray(values, dtype=float), bins=edges, density=True)
        ax.step(edges, steps(hist), where="post", color="black", lw=1, label="truth")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("value")
    ax.set_ylabel("density")
    ax.set_title(title)
    legend_outside(ax)
    return ax


def category_figsize(k: int, labels=None, width: float = 10.0, height: float = 4.0):
    """A figure size for a plot over K categories: wider for many, taller for long labels.

    The default width leaves room for a legend to the right of the axes.
    """
    width = max(width, 0.16 * k)
    if labels is not None:
        longest = min(max(len(str(label)) for label in labels), 2 * LABEL_WRAP)
        height += min(2.5, 0.06 * longest)
    return (width, height)


def plot_error_by_method(summary: list[dict[str, Any]], metric: str = "tv", ax=None):
    """Bar chart of an error metric (mean ± sd over repeats) per method and mechanism."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{e['mechanism']} ε={e['epsilon']:g}" for e in summary]
    groups = list(dict.fromkeys(labels))
    methods = list(dict.fromkeys(e["method"] for e in summary))
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        vals = np.full(len(groups), np.nan)
        errs = np.zeros(len(groups))
        for e, label in zip(summary, labels, strict=True):
            if e["method"] == method:
                vals[groups.index(label)] = e[metric]
                errs[groups.index(label)] = e[f"{metric}_sd"]
        pos = np.arange(len(groups)) + (j - (len(methods) - 1) / 2) * width
        ax.bar(pos, vals, width, yerr=errs, label=method, capsize=2)
    ax.set_xticks(np.arange(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric.upper())
    legend_outside(ax)
    return ax


def _styles(names) -> dict:
    """One (color, marker, line style) per name, all different (up to 40 names)."""
    return {
        name: {
            "color": f"C{i % 10}",
            "marker": MARKERS[i % len(MARKERS)],
            "ls": LINESTYLES[(i // len(MARKERS)) % len(LINESTYLES)],
        }
        for i, name in enumerate(names)
    }


def plot_error_vs(
    summary: list[dict[str, Any]],
    x: str = "epsilon",
    metric: str = "tv",
    ax=None,
    mechanism: str | None = None,
    legend: bool = True,
    styles: dict | None = None,
):
    """Error (mean ± sd over repeats) against ``x`` ("epsilon" or "n"), one line per method.

    ``summary`` rows carry ``x``, ``metric``, ``f"{metric}_sd"``, ``mechanism`` and ``method``
    (the rows of :func:`bayesldp.workflows.study_report.summarise`, with an ``n`` column for
    studies over n).  ``mechanism`` keeps that mechanism's rows only (the lines are then named
    by method); otherwise every (mechanism, method) pair is a line.  ``styles`` maps a
    ``(mechanism, method)`` pair to the keyword arguments of its line (color, marker, ls).
    Log-log axes: the error of every consistent estimator falls as a power of n and eps.  Each
    line has its own color, marker and line style, and the lines are moved sideways by a few
    percent of x (dodged) so that coinciding lines and their error bars stay visible; ticks are
    at the x values of the data, written plainly.  The legend is outside the axes.
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    if mechanism is not None:
        summary = [e for e in summary if e["mechanism"] == mechanism]
    lines = list(dict.fromkeys((e["mechanism"], e["method"]) for e in summary))
    styles = _styles(lines) if styles is None else styles
    xs_all = sorted({float(e[x]) for e in summary})
    spread = np.log(xs_all[-1] / xs_all[0]) if len(xs_all) > 1 else 1.0
    step = 0.012 * spread  # dodge, in log x
    for i, (mech, method) in enumerate(lines):
        rows = sorted(
            (e for e in summary if (e["mechanism"], e["method"]) == (mech, method)),
            key=lambda e: e[x],
        )
        xs = np.array([e[x] for e in rows], dtype=float)
        ys = np.array([e[metric] for e in rows])
        sd = np.array([e[f"{metric}_sd"] for e in rows])
        dodge = np.exp((i - (len(lines) - 1) / 2) * step)
        label = method if mechanism is not None else f"{mech}: {method}"
        ax.errorbar(xs * dodge, ys, yerr=sd, ms=5, capsize=2, lw=1.3, label=label,
                    **styles[(mech, method)])  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    import matplotlib.ticker

    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xticks(xs_all, [f"{v:g}" for v in xs_all])
    ax.set_xlabel("ε" if x == "epsilon" else x)
    ax.set_ylabel(metric.upper())
    if legend:
        legend_outside(ax, ncol=1 if len(lines) <= 12 else 2)
    return ax


def plot_error_vs_panels(
    summary: list[dict[str, Any]], x: str = "epsilon", metric: str = "tv", fig=None
):
    """:func:`plot_error_vs` with one panel per mechanism (shared y), one legend of methods.

    Returns the axes.  Each method has the same style in every panel; the legend sits to the
    right of the last panel, outside the data.
    """
    plt = _pyplot()
    mechanisms = list(dict.fromkeys(e["mechanism"] for e in summary))
    methods = list(dict.fromkeys(e["method"] for e in summary))
    ncols = min(3, len(mechanisms))
    nrows = -(-len(mechanisms) // ncols)
    if fig is None:
        fig = plt.figure(figsize=(3.6 * ncols + 2.4, 3.2 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    styles = _styles(methods)
    for ax, mech in zip(axes.ravel(), mechanisms, strict=False):
        pairs = {(mech, method): styles[method] for method in methods}
        plot_error_vs(summary, x, metric, ax, mechanism=mech, legend=False, styles=pairs)
        ax.set_title(mech, fontsize=10)
        if ax.get_subplotspec().colspan.start > 0:
            ax.set_ylabel("")  # the shared y axis is named on the first panel of its row
    for ax in axes.ravel()[len(mechanisms) :]:
        ax.set_visible(False)
    handles = [
        plt.Line2D(
            [],
            [],
            color=styles[m]["color"],
            marker=styles[m]["marker"],
            ls=styles[m]["ls"],
            label=m,
        )
        for m in methods
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=9, title="method")
    return axes


def plot_survey_trajectory(
    history, theta_true, ax=None, window: int = 200, label: str = "", subset: bool = True
):
    """TV(theta_t, theta) and the moving mean of ``|S_t|`` along an adaptive survey.

    ``history`` is :attr:`bayesldp.AdaptiveSurvey.history` (variables ``theta`` (step,
    category), ``subset_size`` (user), ``batch_size`` (batch_index)); returns the two axes.
    ``subset=False`` leaves ``|S_t|`` out (the non-adaptive baseline is GRR: it has no subset).
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    theta = np.asarray(history["theta"].values)
    sizes = np.asarray(history["batch_size"].values)
    users_at_step = np.concatenate([[0], np.cumsum(sizes)])[: theta.shape[0]]
    tv = 0.5 * np.abs(theta - np.asarray(theta_true)).sum(axis=1)
    ax[0].plot(users_at_step, tv, lw=1, label=label)
    ax[0].set_ylabel("TV(θ_t, θ)")
    ax[0].set_yscale("log")
    sizes = np.asarray(history["subset_size"].values, dtype=float)
    w = max(1, min(window, sizes.size))
    if subset:
        moving = np.convolve(sizes, np.ones(w) / w, mode="valid")
        ax[1].plot(np.arange(w, sizes.size + 1), moving, lw=1, label=label)
    ax[1].set_ylabel(f"|S_t| (mean of {w})")
    ax[1].set_xlabel("users t")
    if label:
        ax[0].legend(fontsize=7)
    return ax


def plot_survey_posterior(history, theta_true=None, ax=None, top: int = 4, labels=None):
    """The posterior's trajectory along a survey: mean and 90% band of the ``top`` categories.

    ``history`` is :attr:`bayesldp.AdaptiveSurvey.history` of a survey with
    ``engine="posterior"`` (variables ``posterior_users``, ``posterior_mean``,
    ``posterior_lower``, ``posterior_upper``: one entry per refresh of its posterior pool);
    the categories shown are the ``top`` largest of the last posterior mean, each with the true
    frequency as a dashed line when ``theta_true`` is given.  Users on a log axis.  Returns the
    axis.
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    if "posterior_users" not in history:
        from bayesldp.errors import InvalidInputError

        raise InvalidInputError(
            "history: has no posterior trajectory (a survey with engine='posterior' records it)"
        )
    users = np.asarray(history["posterior_users"].values)
    mean = np.asarray(history["posterior_mean"].values)
    lower = np.asarray(history["posterior_lower"].values)
    upper = np.asarray(history["posterior_upper"].values)
    shown = np.argsort(-mean[-1], kind="stable")[:top] if users.size else []
    for c in shown:
        name = str(labels[c]) if labels is not None else f"category {c}"
        (line,) = ax.plot(users, mean[:, c], lw=1.5, label=name)
        ax.fill_between(users, lower[:, c], upper[:, c], color=line.get_color(), alpha=0.2)
        if theta_true is not None:
            ax.axhline(float(theta_true[c]), color=line.get_color(), ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("users so far")
    ax.set_ylabel("θ: posterior mean, 90% band")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax


def plot_ppc_categories(ppc, ax=None, var: str = "stat", level: float = 0.9):
    """Posterior predictive check of a per-category statistic: one point per category.

    ``ppc`` is :func:`bayesldp.sample_posterior_predictive`'s output (``posterior_predictive``
    and ``observed_data`` holding ``var`` with dim ``category``).  Each category shows the
    replicated values' median and central ``level`` interval (a bar) and the observed value (a
    dot, red where it falls outside the interval), which is what a check of K category counts
    needs; ArviZ's default ``plot_ppc`` draws a density over the K values instead.  Returns the
    axis.
    """
    plt = _pyplot()
    pred = ppc.posterior_predictive[var]
    observed = np.asarray(ppc.observed_data[var].values, dtype=float)
    labels = list(ppc.observed_data[var]["category"].values)
    if ax is None:
        _, ax = plt.subplots(figsize=category_figsize(len(labels), labels))
    tail = (1 - level) / 2
    lo, mid, hi = (np.asarray(pred.quantile(q, ("chain", "draw")).values, dtype=float)
                   for q in (tail, 0.5, 1 - tail))  # fmt: skip
    x = np.arange(len(labels))
    ax.errorbar(x, mid, yerr=[mid - lo, hi - mid], fmt="_", color="C0", capsize=4,
                label=f"replicated: median and {level:.0%} interval")  # fmt: skip
    outside = (observed < lo) | (observed > hi)
    ax.scatter(x[~outside], observed[~outside], color="k", zorder=3, s=18, label="observed")
    if outside.any():
        ax.scatter(x[outside], observed[outside], color="C3", zorder=3, s=24,
                   label="observed, outside the interval")  # fmt: skip
    category_axis(ax, labels)
    ax.set_ylabel(var)
    legend_outside(ax)
    return ax


def study_figures(result, summary: list[dict[str, Any]], out: Path) -> list[str]:
    """The standard figures of a study report; returns the file names written."""
    plt = _pyplot()
    names = []
    fig, ax = plt.subplots(figsize=(10, 4.5))
    plot_error_by_method(summary, "tv", ax)
    ax.set_title("Error per method: TV (mean ± sd over repeats)")
    fig.tight_layout()
    fig.savefig(out / "error_by_method.png", dpi=110)
    plt.close(fig)
    names.append("error_by_method.png")
    if len({e["epsilon"] for e in summary}) > 1:
        fig = plt.figure(layout="constrained")
        axes = plot_error_vs_panels(summary, "epsilon", "tv", fig)
        fig.set_size_inches(3.6 * axes.shape[1] + 2.4, 3.2 * axes.shape[0] + 0.6)
        fig.suptitle("TV against ε (mean ± sd over repeats)")
        fig.savefig(out / "error_vs_epsilon.png", dpi=110)
        plt.close(fig)
        names.append("error_vs_epsilon.png")
    truth = result.truths[0]
    first = [e for e in result.estimates if e["repeat"] == 0]
    for mech_label in dict.fromkeys((e["mechanism"], e["epsilon"]) for e in first):
        rows = [e for e in first if (e["mechanism"], e["epsilon"]) == mech_label]
        estimates = {}
        for method in dict.fromkeys(e["method"] for e in rows):
            sel = sorted((e for e in rows if e["method"] == method), key=lambda e: e["category"])
            point = np.array([e["estimate"] for e in sel])
            lower = np.array([e["lower_90"] for e in sel], dtype=float)
            upper = np.array([e["upper_90"] for e in sel], dtype=float)
            lower, upper = (
                np.where(np.isnan(lower), point, lower),
                np.where(np.isnan(upper), point, upper),
            )
            estimates[method] = (point, lower, upper)
        labels = result.labels if getattr(result, "named", False) else None
        fig, ax = plt.subplots(figsize=category_figsize(len(truth), labels))
        title = f"{mech_label[0]} ε={mech_label[1]:g}: 90% intervals vs truth (repeat 1)"
        plot_estimates_vs_truth(truth, estimates, ax, title, labels=labels)
        fig.tight_layout()
        safe = "".join(c if c.isalnum() else "_" for c in mech_label[0]).strip("_")
        name = f"estimates_{safe}_eps{mech_label[1]:g}.png"  # "OLH (g=2)": OLH__g_2
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    return names


def plot_rounds(
    idata,
    truth=None,
    estimates: dict[str, Any] | None = None,
    categories=None,
    prob: float = 0.9,
    axes=None,
    ncols: int = 5,
):
    """Each category's trajectory over rounds: posterior mean and equal-tailed ``prob`` band.

    ``idata`` is :func:`bayesldp.fit_rounds`'s InferenceData (``theta`` with dims ``round,
    category``) or :func:`bayesldp.bayes.summarize_rounds`'s Dataset.  ``truth`` (T, K) is drawn
    as a black dashed line; ``estimates`` maps a name to another (T, K) array of estimates (e.g.
    per-round MLEs), drawn as markers.  ``categories`` picks category positions (default all);
    one panel per category, ``ncols`` to a row.  Returns the array of axes.
    """
    from bayesldp.bayes.dynamic import summarize_rounds

    plt = _pyplot()
    summary = idata if "mean" in getattr(idata, "data_vars", ()) else summarize_rounds(idata, prob)
    mean = np.asarray(summary["mean"].values)
    lower, upper = np.asarray(summary["lower"].values), np.asarray(summary["upper"].values)
    rounds = np.asarray(summary["round"].values)
    x = rounds if rounds.dtype.kind in "iuf" else np.arange(rounds.size)
    labels = list(summary["category"].values)
    chosen = list(range(mean.shape[1])) if categories is None else list(categories)
    if axes is None:
        ncols = max(1, min(ncols, len(chosen)))
        nrows = -(-len(chosen) // ncols)
        _, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.2 * nrows), sharex=True,
                               squeeze=False)  # fmt: skip
    flat = np.asarray(axes).reshape(-1)
    markers = "osd^v<>"
    for ax, c in zip(flat, chosen, strict=False):
        ax.fill_between(x, lower[:, c], upper[:, c], alpha=0.3, color="C0",
                        label=f"{prob:.0%} interval")  # fmt: skip
        ax.plot(x, mean[:, c], color="C0", lw=1.5, label="posterior mean")
        if truth is not None:
            ax.plot(x, np.asarray(truth)[:, c], color="k", ls="--", lw=1, label="truth")
        for i, (name, values) in enumerate((estimates or {}).items()):
            ax.plot(x, np.asarray(values)[:, c], ls="none", marker=markers[i % len(markers)],
                    ms=3, color=f"C{i + 1}", label=name)  # fmt: skip
        ax.set_title(str(labels[c]), fontsize=9)
    for ax in flat[len(chosen) :]:
        ax.set_visible(False)
    for ax in np.asarray(axes)[-1] if np.asarray(axes).ndim == 2 else flat:
        ax.set_xlabel("round")
    flat[0].set_ylabel("frequency")
    flat[0].legend(fontsize=7)
    if rounds.dtype.kind not in "iuf":
        flat[0].set_xticks(x, [str(r) for r in rounds])
    return axes
