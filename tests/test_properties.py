"""Property-based checks (hypothesis): for any parameters, reports, counts and tallies, the
package gives a clear error of its own or a correct result -- never another exception, a NaN
or a wrapped count (warnings are errors in this suite, so a NaN-producing warning fails too).

Bounded example counts keep this in the default suite; ``HYPOTHESIS_PROFILE=thorough`` runs
1,000 examples per property.

A property that returns early on an expected error would pass if every example were refused,
so each one runs its ``@given`` check inside the test, counts the examples that reach the final
assertion (:class:`Reached`), and asserts at the end that at least a stated fraction did (a
nested ``@given`` is not collected by pytest, so hypothesis ``event`` statistics would not show)."""

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
# half the examples draw k and epsilon from anywhere above, half from a valid range: before
# the split some runs of 40 examples built no mechanism at all
PARAMETERS = st.one_of(st.tuples(KS, EPSILONS), st.tuples(st.integers(2, 40), st.floats(0.1, 10)))


class Reached:
    """Counts a property's examples: all of them, and those that reach the final assertion."""

    def __init__(self):
        self.examples = self.reached = 0

    def refused(self):
        self.examples += 1

    def ok(self):
        self.examples += 1
        self.reached += 1

    def check(self, fraction):
        """At least ``fraction`` of the examples (and at least one) reached the assertion."""
        assert self.examples > 0
        assert self.reached >= max(1, fraction * self.examples), (self.reached, self.examples)


def _build(name, k, epsilon, data):
    params = {}
    if name == "RRRR":
        params["subset"] = data.draw(st.lists(st.integers(-2, 45), max_size=5), label="subset")
    return make_mechanism(name, k, epsilon, **params)


def test_any_parameters_build_an_exact_mechanism_or_raise_a_package_error():
    """0.28-0.68 of the examples built a mechanism over 30 runs of 40 (scratch props.py); at
    least 0.05 must."""
    count = Reached()

    @FAST
    @given(name=st.sampled_from(names()), params=PARAMETERS, data=st.data())
    def check(name, params, data):
        k, epsilon = params
        try:
            mech = _build(name, k, epsilon, data)
        except BayesLDPError:
            return count.refused()
        realised = mech.realised_epsilon()
        assert math.isfinite(realised) and realised <= mech.epsilon * (1 + 1e-9) + 1e-12
        count.ok()

    check()
    count.check(0.05)


# half valid values, half anything (st.one_of would flatten into five equal branches): with
# anything alone some runs of 40 examples had 0-1 that built a tally
VALUES = st.sampled_from([
    st.lists(st.integers(0, 9), min_size=1, max_size=60).map(np.array),
    st.one_of(
        st.lists(st.integers(-3, 12), min_size=0, max_size=60).map(np.array),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=10).map(np.array),
        st.lists(st.booleans(), max_size=10).map(np.array),
        st.just(np.zeros((2, 2), dtype=int)),
    ),
]).flatmap(lambda strategy: strategy)  # fmt: skip


def test_any_values_give_a_tally_of_the_same_size_or_a_package_error():
    """0.25-0.80 of the examples built a tally over 30 runs of 40; at least 0.05 must."""
    count = Reached()

    @FAST
    @given(name=st.sampled_from(names()), x=VALUES, seed=st.integers(0, 2**32))
    def check(name, x, seed):
        mech = make_mechanism(name, 10, 1.5, **({"subset": [0, 3]} if name == "RRRR" else {}))
        try:
            tally = mech.tally(mech.perturb(x, rng=seed))
        except BayesLDPError:
            return count.refused()
        assert tally.n == x.shape[0] and tally.counts.dtype == np.int64
        assert np.all(np.isfinite(tally.stat))
        est = bayesldp.estimate(tally, "mle")
        assert np.all(np.isfinite(est.frequencies)) and abs(est.frequencies.sum() - 1) < 1e-9
        count.ok()

    check()
    count.check(0.05)


# anything (rarely valid: in some runs 2 of 40 examples were) or valid counts
COUNTS = st.one_of(
    st.lists(
        st.one_of(st.integers(-2, 1000), st.integers(2**62, 2**64), st.just(0)),
        min_size=5,
        max_size=5,
    ),
    st.lists(st.integers(0, 1000), min_size=5, max_size=5),
)


def test_any_counts_are_exact_or_refused():
    """0.47-0.90 of the examples were valid counts over 30 runs of 40; at least 0.05 must."""
    count = Reached()

    @FAST
    @given(
        name=st.sampled_from(["GRR", "HadamardResponse", "RRRR", "OUE"]),
        counts=COUNTS,
        seed=st.integers(0, 2**32),
    )
    def check(name, counts, seed):
        mech = make_mechanism(name, 5, 1.0, **({"subset": [1]} if name == "RRRR" else {}))
        try:
            tally = mech.simulate_tally(counts, rng=seed)
        except BayesLDPError:
            return count.refused()
        assert tally.n == sum(counts) and tally.n > 0
        count.ok()

    check()
    count.check(0.05)


# half the tallies have counts >= 0 and entries in [0, 1] (valid unless a row or all the
# counts are 0), half counts from -1 and entries anything in [-1, 2] or NaN (almost always
# refused): with the second kind alone 0-1 of 40 examples built a tally.  Valid entries are 0
# or at least 1e-3 and no entry is subnormal: tinier ones find two open bugs (the xfail tests
# below; HYPOTHESIS_PROFILE=thorough found both)
VALID = (st.integers(0, 10**6), st.floats(0, 1).filter(lambda v: v == 0 or v >= 1e-3))
ANY = (
    st.integers(-1, 10**6),
    st.one_of(st.floats(-1, 2, allow_subnormal=False), st.just(float("nan"))),
)
ROWS = st.tuples(st.integers(1, 6), st.sampled_from([VALID, ANY])).flatmap(
    lambda u_kind: st.tuples(
        st.lists(u_kind[1][0], min_size=u_kind[0], max_size=u_kind[0]),
        st.lists(
            st.lists(u_kind[1][1], min_size=3, max_size=3),
            min_size=u_kind[0],
            max_size=u_kind[0],
        ),
    )
)


def test_any_dense_tally_is_valid_or_refused_and_estimates_stay_on_the_simplex():
    """0.12-0.82 of the examples reached the final assertion over 30 runs of 40; at least
    0.05 must."""
    count = Reached()

    @FAST
    @given(rows=ROWS, method=st.sampled_from(["mle", "em", "em_mr"]))
    def check(rows, method):
        counts, matrix = rows
        try:
            tally = bayesldp.Tally(np.array(counts), rows=np.array(matrix), stat=np.zeros(3),
                                   family="prop")  # fmt: skip
        except BayesLDPError:
            return count.refused()
        assert tally.n == sum(c for c in counts if c > 0)
        try:
            est = bayesldp.estimate(tally, method)
        except InvalidInputError as err:  # em_mr's defaults need a finite budget (no zero in a row)
            assert method == "em_mr" and "no finite budget" in str(err)
            return count.refused()
        assert np.all(np.isfinite(est.frequencies)) and np.all(est.frequencies >= 0)
        assert est.frequencies.sum() == pytest.approx(1.0, abs=1e-9)
        count.ok()

    check()
    count.check(0.05)


@pytest.mark.xfail(strict=True, raises=RuntimeWarning, reason="open bug: 1 / offset overflows")
def test_a_subnormal_row_entry_builds_a_likelihood_without_overflow():
    """Found by the property above with entries down to 0: a row ``[1, 1, 5e-324]`` has the
    subnormal offset ``5e-324`` and ``Likelihood`` computes ``1 / offset`` (likelihood.py,
    ``inv_offset``), which overflows."""
    rows = np.array([[0.0, 0.0, 1.0]] * 5 + [[1.0, 1.0, 5e-324]])
    tally = bayesldp.Tally(np.array([0, 0, 0, 0, 0, 1]), rows=rows, stat=np.zeros(3),
                           family="prop")  # fmt: skip
    est = bayesldp.estimate(tally, "mle")
    assert np.all(np.isfinite(est.frequencies))


@pytest.mark.xfail(strict=True, reason="open bug: the MLE leaves the simplex by -1e-109")
def test_mle_of_rows_with_tiny_entries_stays_on_the_simplex():
    """Found by the property above (HYPOTHESIS_PROFILE=thorough) with entries down to 0: the
    MLE of this tally has frequency ``-1.0e-109`` for category 1."""
    rows = np.array([[1e-08, 6.353656954475502e-78, 1.0], [1.0, 0.0, 0.0]])
    tally = bayesldp.Tally(np.array([225, 1]), rows=rows, stat=np.zeros(3), family="prop")
    est = bayesldp.estimate(tally, "mle")
    assert np.all(est.frequencies >= 0), est.frequencies


def test_the_gaussian_mechanism_at_a_small_epsilon_builds_without_warnings():
    """Found by the first property once its examples reached the assertion (``Gaussian``,
    k = 2, eps = 0.0078125 and 0.109375): building it and its realised epsilon raised scipy's
    IntegrationWarning (roundoff), an error in this suite, at scattered small epsilons (a scratch
    scan of k = 2, eps 0.02-80 in steps of 0.001 up to 2: 0.020-0.024, 0.041-0.049, 0.103).
    The hockey-stick integral now falls back to its closed form where quadrature is roundoff,
    and the property covers every epsilon."""
    for eps in (0.0078125, 0.02, 0.045, 0.103, 0.109375, 1e-8):
        realised = make_mechanism("Gaussian", 2, eps).realised_epsilon()
        assert realised == pytest.approx(eps, rel=1e-6)
