"""Tests of the real data sets shipped in bayesldp.datasets."""

from __future__ import annotations

import numpy as np
import pytest

from bayesldp.datasets import Dataset, list_datasets, load_dataset
from bayesldp.errors import InvalidInputError, InvalidTypeError

# Pinned to the output of the extraction script in bayesldp/datasets/README.md:
# name -> (K, n, first count, last count).
EXPECTED = {
    "seattle_weather": (5, 1461, 54, 714),
    "anes96_party_id": (7, 944, 200, 175),
    "anes96_income": (24, 944, 19, 68),
    "us_airports_by_state": (56, 3364, 263, 32),
    "occupational_status": (64, 3498, 50, 106),
    "anes96_age": (73, 944, 3, 2),
}


def test_list_datasets_names_and_order():
    names = list_datasets()
    assert names == list(EXPECTED)
    ks = [load_dataset(n).k for n in names]
    assert ks == sorted(ks)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_dataset_is_a_valid_tally(name):
    ds = load_dataset(name)
    assert isinstance(ds, Dataset)
    assert ds.name == name
    assert ds.counts.dtype == np.int64
    assert ds.counts.shape == (ds.k,)
    assert np.all(ds.counts >= 0)
    assert int(ds.counts.sum()) == ds.n
    assert 5 <= ds.k <= 100
    assert len(ds.labels) == ds.k
    assert len(set(ds.labels)) == ds.k
    assert all(isinstance(lab, str) and lab for lab in ds.labels)
    assert ds.frequencies.shape == (ds.k,)
    assert ds.frequencies.sum() == pytest.approx(1.0, abs=1e-12)
    assert ds.description and ds.source


@pytest.mark.parametrize("name", list(EXPECTED))
def test_dataset_checksum(name):
    k, n, first, last = EXPECTED[name]
    ds = load_dataset(name)
    assert (ds.k, ds.n, int(ds.counts[0]), int(ds.counts[-1])) == (k, n, first, last)


def test_known_labels_and_values():
    pid = load_dataset("anes96_party_id")
    assert pid.labels[0] == "Strong Democrat"
    assert pid.labels[-1] == "Strong Republican"
    assert pid.counts.tolist() == [200, 180, 108, 37, 94, 150, 175]
    weather = load_dataset("seattle_weather")
    assert weather.labels == ("drizzle", "fog", "rain", "snow", "sun")
    occ = load_dataset("occupational_status")
    assert occ.labels[8] == "father 2 -> son 1"
    # the 8 x 8 mobility table: diagonal (same status as father) is heavier than off-diagonal
    table = occ.counts.reshape(8, 8)
    assert np.trace(table) / occ.n > 0.25
    assert int(table[6, 0]) == 0 and int(table[7, 0]) == 0  # zero cells are kept


def test_values_reproduce_counts():
    ds = load_dataset("anes96_income")
    x = ds.values()
    assert x.dtype == np.int64 and x.shape == (ds.n,)
    np.testing.assert_array_equal(np.bincount(x, minlength=ds.k), ds.counts)


def test_counts_are_read_only_and_fresh():
    a = load_dataset("seattle_weather")
    with pytest.raises(ValueError):
        a.counts[0] = 1
    b = load_dataset("seattle_weather")
    assert a.counts is not b.counts
    assert a == b and hash(a) == hash(b)
    assert a != load_dataset("anes96_party_id")


def test_unknown_name_lists_valid_names():
    with pytest.raises(InvalidInputError, match="unknown data set 'nope'") as info:
        load_dataset("nope")
    for name in EXPECTED:
        assert name in str(info.value)


def test_non_string_name():
    with pytest.raises(InvalidTypeError, match="name"):
        load_dataset(3)  # type: ignore[arg-type]
