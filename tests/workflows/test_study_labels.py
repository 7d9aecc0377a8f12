"""Category labels carried from data sets and specs into every output of a study."""

import csv

import numpy as np
import pytest

from bayesldp import plotting
from bayesldp.bayes import load_fit
from bayesldp.workflows.cli import main

# structure only: short chains may warn
pytestmark = pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")

SPEC = """
kind = "study"
[study]
name = "labelled"
n = 1000
seed = 3
[population]
{population}
[estimators]
methods = ["oracle", "mle"]
[bayes]
method = "auto"
draws = 100
chains = 1
[[mechanisms]]
name = "GRR"
epsilon = 3.0
"""


def _run(tmp_path, population, monkeypatch):
    seen = []
    axis = plotting.category_axis

    def spy(ax, labels=None, k=None):
        seen.append(labels)
        axis(ax, labels, k)

    monkeypatch.setattr(plotting, "category_axis", spy)
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(population=population))
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    with (out / "estimates.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    (posterior,) = out.glob("posterior_*.nc")
    return rows, load_fit(posterior), seen


def test_spec_labels_reach_csv_figures_and_posteriors(tmp_path, monkeypatch, capsys):
    labels = ["Strong Democrat", "Independent", "Strong Republican"]
    population = f'kind = "uniform"\nk = 3\nlabels = {labels!r}'.replace("'", '"')
    rows, idata, seen = _run(tmp_path, population, monkeypatch)
    assert list(rows[0])[4:6] == ["category", "label"]  # the integer category stays
    assert [(r["category"], r["label"]) for r in rows if r["method"] == "oracle"] == [
        ("0", "Strong Democrat"),
        ("1", "Independent"),
        ("2", "Strong Republican"),
    ]
    assert {r["label"] for r in rows if r["method"].startswith("posterior")} == set(labels)
    assert idata.posterior["category"].values.tolist() == labels
    assert idata.observed_data["category"].values.tolist() == labels
    assert seen == [labels]  # the one estimates figure names its categories
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Category labels (column `label` of estimates.csv" in report
    assert "0 = Strong Democrat; 1 = Independent; 2 = Strong Republican." in report


def test_dataset_labels_by_default(tmp_path, monkeypatch, capsys):
    rows, idata, seen = _run(tmp_path, 'kind = "dataset"\ndataset = "seattle_weather"', monkeypatch)
    weather = ["drizzle", "fog", "rain", "snow", "sun"]
    assert [r["label"] for r in rows if r["method"] == "mle"] == weather
    assert idata.posterior["category"].values.tolist() == weather
    assert seen == [weather]


def test_without_labels_categories_keep_their_numbers(tmp_path, monkeypatch, capsys):
    rows, idata, seen = _run(tmp_path, 'kind = "uniform"\nk = 3', monkeypatch)
    assert [r["label"] for r in rows if r["method"] == "mle"] == ["0", "1", "2"]
    assert np.array_equal(idata.posterior["category"].values, [0, 1, 2])
    assert seen == [None]  # matplotlib's numbered ticks, as before
    assert "Category labels" not in (tmp_path / "out" / "report.md").read_text()
