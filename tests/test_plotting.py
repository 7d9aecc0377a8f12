import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from bayesldp import plotting


def test_error_vs_epsilon_draws_one_line_per_method():
    summary = [
        {"mechanism": "GRR", "method": m, "epsilon": e, "tv": 0.1 / e, "tv_sd": 0.01}
        for m in ("oracle", "mle")
        for e in (0.5, 1.0, 2.0)
    ]
    ax = plotting.plot_error_vs(summary, "epsilon", "tv")
    assert len(ax.get_lines()) >= 2
    ys = sorted(ax.get_lines()[0].get_ydata())
    np.testing.assert_allclose(ys, [0.05, 0.1, 0.2])


def test_survey_trajectory_tv_and_moving_subset_size():
    theta = np.array([0.7, 0.2, 0.1])
    history = xr.Dataset(
        {
            "theta": (("step", "category"), np.array([[1 / 3] * 3, [0.6, 0.3, 0.1], theta])),
            "batch_size": (("batch_index",), np.array([2, 2])),
            "subset_size": (("user",), np.array([0, 1, 1, 1])),
        }
    )
    top, bottom = plotting.plot_survey_trajectory(history, theta, window=2)
    tv = top.get_lines()[0].get_ydata()
    np.testing.assert_allclose(tv[:2], [0.5 * np.abs(np.array([1 / 3] * 3) - theta).sum(), 0.1])
    np.testing.assert_allclose(bottom.get_lines()[0].get_ydata(), [0.5, 1.0, 1.0])


def test_plotting_keeps_the_users_backend():
    """Importing bayesldp.plotting and drawing must not switch the backend (Jupyter inline)."""
    code = (
        "import matplotlib; matplotlib.use('svg')\n"
        "from bayesldp import plotting\n"
        "plotting.plot_error_vs([{'mechanism': 'GRR', 'method': 'mle', 'epsilon': 1.0, "
        "'tv': 0.1, 'tv_sd': 0.01}], 'epsilon', 'tv')\n"
        "print(matplotlib.get_backend())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "svg"


@pytest.mark.parametrize(
    "before, env, expected",
    [
        ("", {}, "agg Agg"),
        ("", {"MPLBACKEND": "pdf"}, "pdf pdf"),
        ("import matplotlib; matplotlib.use('pdf')", {}, "pdf Agg"),
    ],
    ids=["unset", "MPLBACKEND", "already-chosen"],
)
def test_cli_chooses_agg_only_when_the_user_did_not(before, env, expected):
    """The command line sets MPLBACKEND=Agg unless set; a backend already in use stays."""
    code = (
        f"{before}\nfrom bayesldp.workflows.cli import main\n"
        'main(["recommend", "--k", "3", "--epsilon", "1", "--n", "100"])\n'
        "import os, matplotlib\n"
        "print(matplotlib.get_backend().lower(), os.environ.get('MPLBACKEND'))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | env
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == expected


def test_estimates_figure_names_the_categories():
    """Labels on the category axis, wrapped and rotated when long, "$" kept as text."""
    import matplotlib.pyplot as plt

    truth = np.array([0.5, 0.3, 0.2])
    estimates = {"mle": (truth, truth - 0.05, truth + 0.05)}
    ax = plotting.plot_estimates_vs_truth(truth, estimates, labels=["a", "b", "c"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert all(t.get_rotation() == 0 for t in ax.get_xticklabels())  # short: horizontal
    labels = ["None or less than $2,999 a year", "$3,000-$4,999", "Strong Republican"]
    ax = plotting.plot_estimates_vs_truth(truth, estimates, labels=labels)
    texts = [t.get_text() for t in ax.get_xticklabels()]
    assert texts[0] == "None or less than \\$2,999\na year" and texts[1] == "\\$3,000-\\$4,999"
    assert all(t.get_rotation() == 45 for t in ax.get_xticklabels())
    ax = plotting.plot_estimates_vs_truth(truth, estimates)  # no labels: numbered ticks
    assert ax.get_xlabel() == "category" and "a" not in [t.get_text() for t in ax.get_xticklabels()]
    many = np.full(40, 1 / 40)
    ax = plotting.plot_estimates_vs_truth(
        many, {"m": (many, many, many)}, labels=[f"level {i}" for i in range(40)]
    )
    assert len(ax.get_xticklabels()) == 40 and ax.get_xticklabels()[0].get_rotation() == 90
    assert plotting.category_figsize(40, ["level 1"])[0] > 6.0
    plt.close("all")


def _summary(mechanisms=("GRR", "OUE"), methods=("oracle", "norm_sub", "mle", "em", "post")):
    """Rows like study_report.summarise's: coinciding errors, as GRR's estimators often give."""
    return [
        {"mechanism": mech, "method": m, "epsilon": e, "tv": 0.05 / e, "tv_sd": 0.01}
        for mech in mechanisms
        for m in methods
        for e in (0.5, 1.0, 2.0)
    ]


def _bbox(artist):
    return artist.get_window_extent(artist.figure.canvas.get_renderer())


def _legend_clear_of_axes(legend, ax) -> bool:
    """The legend's box lies outside the axes' box (it can cover no data)."""
    a, b = _bbox(legend), _bbox(ax)
    return a.x0 >= b.x1 or a.x1 <= b.x0 or a.y0 >= b.y1 or a.y1 <= b.y0


def test_legends_cover_no_data():
    """Legends inside the axes covered the first category's intervals."""
    import matplotlib.pyplot as plt

    truth = np.array([0.4, 0.3, 0.2, 0.1])
    estimates = {m: (truth, truth - 0.05, truth + 0.05) for m in ("a", "b", "c", "d", "e")}
    ax = plotting.plot_estimates_vs_truth(truth, estimates, labels=["w", "x", "y", "z"])
    ax.figure.tight_layout()
    assert _legend_clear_of_axes(ax.get_legend(), ax)
    for draw in (plotting.plot_error_by_method, plotting.plot_error_vs):
        ax = draw(_summary(), metric="tv")
        ax.figure.tight_layout()
        assert _legend_clear_of_axes(ax.get_legend(), ax), draw.__name__
    fig = plt.figure(layout="constrained")
    axes = plotting.plot_error_vs_panels(_summary(), "epsilon", "tv", fig)
    fig.canvas.draw()
    (legend,) = fig.legends
    assert all(_legend_clear_of_axes(legend, a) for a in axes.ravel())
    plt.close("all")


def test_every_category_is_ticked_without_labels():
    """The OUE estimates plot ticked every other category (0, 2, 4, ...)."""
    import matplotlib.pyplot as plt

    for k in (10, 12, 60):
        truth = np.full(k, 1 / k)
        ax = plotting.plot_estimates_vs_truth(truth, {"m": (truth, truth, truth)})
        assert list(ax.get_xticks()) == list(range(k))
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(x) for x in range(k)]
    plt.close("all")


def test_error_lines_are_told_apart():
    """Error_vs_epsilon's lines overlapped in one style with a tiny legend.

    Every line has its own (color, marker, line style), coinciding lines are dodged sideways,
    the x ticks are the data's epsilons, and the panel figure has one panel per mechanism with
    a method keeping its style in every panel.
    """
    import matplotlib.pyplot as plt

    ax = plotting.plot_error_vs(_summary(), "epsilon", "tv")
    lines = [c.lines[0] for c in ax.containers]
    assert len(lines) == 10
    keys = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(keys) == 10
    starts = sorted(ln.get_xdata()[0] for ln in lines)
    assert starts[0] < 0.5 < starts[-1] and len(set(starts)) == 10  # dodged around eps = 0.5
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "1", "2"]
    assert ax.get_legend().get_texts()[0].get_fontsize() >= 8
    fig = plt.figure(layout="constrained")
    axes = plotting.plot_error_vs_panels(_summary(("GRR", "OUE", "OLH")), "epsilon", "tv", fig)
    assert [a.get_title() for a in axes.ravel()] == ["GRR", "OUE", "OLH"]
    styles = [
        [(c.lines[0].get_color(), c.lines[0].get_marker()) for c in a.containers]
        for a in axes.ravel()
    ]
    assert styles[0] == styles[1] == styles[2] and len(set(styles[0])) == 5
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 5
    plt.close("all")


def test_category_axis_needs_labels_or_k():
    import matplotlib.pyplot as plt

    from bayesldp.errors import InvalidInputError

    _, ax = plt.subplots()
    with pytest.raises(InvalidInputError, match="labels=None and k=None"):
        plotting.category_axis(ax)
    plt.close("all")


def test_ppc_categories_marks_the_observed_values_outside_their_interval():
    """One interval per category from the replicated draws; an observed value outside it is
    drawn apart."""
    import arviz as az

    rng = np.random.default_rng(0)
    draws = rng.normal([100.0, 50.0, 10.0], 3.0, size=(2, 200, 3))
    ppc = az.from_dict(
        posterior_predictive={"stat": draws},
        observed_data={"stat": np.array([101.0, 49.0, 40.0])},
        dims={"stat": ["category"]},
        coords={"category": ["a", "b", "c"]},
    )
    ax = plotting.plot_ppc_categories(ppc)
    points = [c.get_offsets() for c in ax.collections if len(c.get_offsets())]
    inside, outside = points[-2], points[-1]
    np.testing.assert_array_equal(inside[:, 0], [0, 1]) and np.testing.assert_array_equal(
        outside, [[2, 40.0]]
    )
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
