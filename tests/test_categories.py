"""bayesldp.encode: named categories to the integer codes every mechanism perturbs."""

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError


def test_encode_strings_in_the_order_of_the_list():
    cats = ["fog", "rain", "sun"]
    values = np.array(["rain", "sun", "rain", "fog", "sun"])
    codes = bayesldp.encode(values, cats)
    assert codes.dtype == np.int64 and codes.tolist() == [1, 2, 1, 0, 2]
    assert bayesldp.encode(list(values), ("sun", "rain", "fog")).tolist() == [1, 0, 1, 2, 0]
    assert bayesldp.encode(pd.Series(values), cats).tolist() == [1, 2, 1, 0, 2]
    # the codes feed any mechanism; its tally counts them as categories 0..K-1
    reports = bayesldp.GRR(3, 50.0).perturb(codes, rng=0)  # eps = 50: no noise in 5 users
    np.testing.assert_array_equal(reports, codes)


def test_encode_a_categorical_uses_its_own_categories():
    values = pd.Categorical(["hi", "lo", "mid", "lo"], categories=["lo", "mid", "hi"])
    assert bayesldp.encode(values).tolist() == [2, 0, 1, 0]
    assert bayesldp.encode(pd.Series(values)).tolist() == [2, 0, 1, 0]
    # an explicit list wins: the Categorical is re-coded to it
    assert bayesldp.encode(values, ["hi", "mid", "lo"]).tolist() == [0, 2, 1, 2]
    # its unused categories still count (K = 3 below, though "mid" never occurs)
    sparse = pd.Categorical(["lo", "hi"], categories=["lo", "mid", "hi"])
    assert bayesldp.encode(sparse).tolist() == [0, 2]


def test_encode_names_unknown_values_and_how_many():
    values = ["a", "b", "x", "y", "x", "z1", "z2", "z3", "z4", "a"]
    with pytest.raises(InvalidInputError) as info:
        bayesldp.encode(values, ["a", "b", "c"])
    message = str(info.value)
    assert "7 value(s) (6 distinct) are not among the 3 categories" in message
    assert "'x', 'y', 'z1', 'z2', 'z3' and 1 more" in message
    assert "the categories are 'a', 'b', 'c'" in message
    # a Categorical re-coded to a list lacking some of its values
    with pytest.raises(InvalidInputError, match=r"1 value\(s\) \(1 distinct\).*'hi'"):
        bayesldp.encode(pd.Categorical(["lo", "hi"]), ["lo", "mid"])
    # integers are not their string forms
    with pytest.raises(InvalidInputError, match="not among the 2 categories: 1"):
        bayesldp.encode([1, 2], ["1", "2"])


@pytest.mark.parametrize(
    "values, categories, error, message",
    [
        (["a", "b"], None, InvalidTypeError, "categories: needed unless values is a pandas"),
        (["a", "b"], "ab", InvalidTypeError, "got the string 'ab'"),
        (["a", "b"], ["a"], InvalidInputError, "at least 2 categories, got 1"),
        (["a", "b"], ["a", "b", "a"], InvalidInputError, "must be distinct, repeated: \\['a'\\]"),
        (["a", "b"], ["a", None], InvalidInputError, "contains a missing value"),
        (["a", None, "b"], ["a", "b"], InvalidInputError, "1 missing value"),
        ([], ["a", "b"], InvalidInputError, "is empty"),
        ([["a"], ["b"]], ["a", "b"], InvalidInputError, "1-d array"),
        (["a"], 3, InvalidTypeError, "expected a sequence of categories, got int"),
    ],
)
def test_encode_bad_input(values, categories, error, message):
    with pytest.raises(error, match=message):
        bayesldp.encode(values, categories)


@pytest.mark.parametrize("name", ["GRR", "OUE", "OLH", "HadamardResponse"])
def test_perturb_refuses_strings_and_points_to_encode(name):
    mech = bayesldp.mechanisms.make_mechanism(name, 3, 1.0)
    with pytest.raises(InvalidTypeError, match=r"bayesldp.encode\(x, categories=\[...\]\)"):
        mech.perturb(np.array(["a", "b"]), rng=0)
    with pytest.raises(InvalidTypeError, match=r"bayesldp\.encode"):
        mech.perturb(pd.Categorical(["a", "b"]), rng=0)
    # integers are unchanged
    assert len(mech.perturb(np.array([0, 1, 2]), rng=0)) == 3


def test_encode_is_vectorised_on_a_large_input():
    rng = np.random.default_rng(0)
    cats = [f"c{i}" for i in range(50)]
    truth = rng.integers(0, 50, size=1_000_000)
    values = np.array(cats)[truth]
    np.testing.assert_array_equal(bayesldp.encode(values, cats), truth)


def test_check_labels():
    from bayesldp._validation import check_labels

    assert check_labels(["a", "b"], 2) == ("a", "b")
    assert check_labels(np.array(["a", "b"]), 2) == ("a", "b")
    for bad, error, message in [
        ("ab", InvalidTypeError, "expected a list of 2 strings"),
        (["a"], InvalidInputError, "expected 2 labels"),
        (["a", 1], InvalidTypeError, r"labels\[1\]: expected a string"),
        (["a", " "], InvalidInputError, r"labels\[1\]: is empty"),
        (["a", "a"], InvalidInputError, "'a' labels categories 0 and 1"),
    ]:
        with pytest.raises(error, match=message):
            check_labels(bad, 2)
