"""Property-based checks (hypothesis): for any parameters, reports, counts and tallies, the
package gives a clear error of its own or a correct result -- never another exception, a NaN
or a wrapped count (warnings are errors in this suite, so a NaN-producing warning fails too).

Bounded example counts keep this in the default suite; ``HYPOTHESIS_PROFILE=thorough`` runs
1,000 examples per property."""

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayesldp
from bayesldp.errors import BayesLDPError, InvalidInputError
from bayesldp.mechanisms import make_mechanism, names

# 40 examples per property in the default run; HYPOTHESIS_PROFILE=thorough runs 1,000
settings.register_profile("default", max_examples=40)
settings.register_profile("thorough", max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
EPSILONS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.01, max_value=80.0),
    st.integers(-5, 50),
    st.just(True),
)
KS = st.one_of(st.integers(-2, 40), st.floats(0, 10), st.just(None))


def _build(name, k, epsilon, data):
    params = {}
    if name == "RRRR":
        params["subset"] = data.draw(st.lists(st.integers(-2, 45), max_size=5), label="subset")
    return make_mechanism(name, k, epsilon, **params)


@FAST
@given(name=st.sampled_from(names()), k=KS, epsilon=EPSILONS, data=st.data())
def test_any_parameters_build_an_exact_mechanism_or_raise_a_package_error(name, k, epsilon, data):
    try:
        mech = _build(name, k, epsilon, data)
    except BayesLDPError:
        return
    realised = mech.realised_epsilon()
    assert math.isfinite(realised) and realised <= mech.epsilon * (1 + 1e-9) + 1e-12


VALUES = st.one_of(
    st.lists(st.integers(-3, 12), min_size=0, max_size=60).map(np.array),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=10).map(np.array),
    st.lists(st.booleans(), max_size=10).map(np.array),
    st.just(np.zeros((2, 2), dtype=int)),
)


@FAST
@given(name=st.sampled_from(names()), x=VALUES, seed=st.integers(0, 2**32))
def test_any_values_give_a_tally_of_the_same_size_or_a_package_error(name, x, seed):
    mech = make_mechanism(name, 10, 1.5, **({"subset": [0, 3]} if name == "RRRR" else {}))
    try:
        tally = mech.tally(mech.perturb(x, rng=seed))
    except BayesLDPError:
        return
    assert tally.n == x.shape[0] and tally.counts.dtype == np.int64
    assert np.all(np.isfinite(tally.stat))
    est = bayesldp.estimate(tally, "mle")
    assert np.all(np.isfinite(est.frequencies)) and abs(est.frequencies.sum() - 1) < 1e-9


COUNTS = st.lists(
    st.one_of(st.integers(-2, 1000), st.integers(2**62, 2**64), st.just(0)), min_size=5, max_size=5
)


@FAST
@given(
    name=st.sampled_from(["GRR", "HadamardResponse", "RRRR", "OUE"]),
    counts=COUNTS,
    seed=st.integers(0, 2**32),
)
def test_any_counts_are_exact_or_refused(name, counts, seed):
    mech = make_mechanism(name, 5, 1.0, **({"subset": [1]} if name == "RRRR" else {}))
    try:
        tally = mech.simulate_tally(counts, rng=seed)
    except BayesLDPError:
        return
    assert tally.n == sum(counts) and tally.n > 0


ROWS = st.integers(1, 6).flatmap(
    lambda u: st.tuples(
        st.lists(st.integers(-1, 10**6), min_size=u, max_size=u),
        st.lists(
            st.lists(st.one_of(st.floats(-1, 2), st.just(float("nan"))), min_size=3, max_size=3),
            min_size=u,
            max_size=u,
        ),
    )
)


@FAST
@given(rows=ROWS, method=st.sampled_from(["mle", "em", "em_mr"]))
def test_any_dense_tally_is_valid_or_refused_and_estimates_stay_on_the_simplex(rows, method):
    counts, matrix = rows
    try:
        tally = bayesldp.Tally(np.array(counts), rows=np.array(matrix), stat=np.zeros(3),
                               family="prop")  # fmt: skip
    except BayesLDPError:
        return
    assert tally.n == sum(c for c in counts if c > 0)
    try:
        est = bayesldp.estimate(tally, method)
    except InvalidInputError as err:  # em_mr's defaults need a finite budget (no zero in a row)
        assert method == "em_mr" and "no finite budget" in str(err)
        return
    assert np.all(np.isfinite(est.frequencies)) and np.all(est.frequencies >= 0)
    assert est.frequencies.sum() == pytest.approx(1.0, abs=1e-9)
