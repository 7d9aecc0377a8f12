import numpy as np
import pytest

import bayesldp
from bayesldp import Tally


def test_merge_is_addition_of_counts():
    mech = bayesldp.GRR(4, 1.0)
    a = mech.tally(np.array([0, 0, 1, 3]))
    b = mech.tally(np.array([1, 2, 2]))
    merged = a + b
    assert merged == mech.tally(np.array([0, 0, 1, 3, 1, 2, 2]))
    assert sum([a, b]) == merged
    assert merged.n == 7


def test_support_form_dedupes_and_matches_dense():
    support = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=bool)
    tally = Tally([2, 1, 3], support=support, levels=(0.2, 0.6), stat=np.zeros(3), family="t")
    assert tally.n_rows == 2 and tally.n == 6
    theta = np.array([0.5, 0.3, 0.2])
    dense = Tally([2, 1, 3], rows=0.2 + 0.4 * support, stat=np.zeros(3), family="t")
    np.testing.assert_allclose(tally.loglik(theta), dense.loglik(theta), rtol=1e-13)
    batch = np.stack([theta, theta[::-1]])
    np.testing.assert_allclose(tally.row_dot(batch), dense.row_dot(batch), rtol=1e-13)


def test_loglik_matches_multinomial_for_grr():
    from scipy import stats

    mech = bayesldp.GRR(3, 1.0)
    report_counts = np.array([5, 2, 7])
    tally = mech.tally_from_report_counts(report_counts)
    theta = np.array([0.2, 0.5, 0.3])
    probs = theta @ mech.channel
    exact = stats.multinomial.logpmf(report_counts, report_counts.sum(), probs)
    const = stats.multinomial.logpmf(report_counts, report_counts.sum(), report_counts / 14) - (
        report_counts @ np.log(report_counts / 14)
    )
    assert tally.loglik(theta) + const == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"counts": [-1, 2], "rows": np.ones((2, 3))}, ">= 0"),
        ({"counts": [1.5, 2], "rows": np.ones((2, 3))}, "whole"),
        ({"counts": [0, 0], "rows": np.ones((2, 3))}, "no reports"),
        ({"counts": [1, 2], "rows": np.ones((3, 3))}, "shape"),
        ({"counts": [1], "rows": np.zeros((1, 3))}, "positive entry"),
        ({"counts": [1], "rows": np.array([[np.nan, 1, 1]])}, "finite"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Tally(**kwargs, stat=np.zeros(3), family="t")


def test_tally_without_dedupe_is_the_same_multiset():
    support = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=bool)
    kept = Tally(
        [2, 1, 3], support=support, levels=(0.2, 0.6), stat=np.zeros(3), family="t", dedupe=False
    )
    merged = Tally([2, 1, 3], support=support, levels=(0.2, 0.6), stat=np.zeros(3), family="t")
    assert kept.n_rows == 3 and merged.n_rows == 2
    assert kept == merged and kept.deduplicated().n_rows == 2
    theta = np.array([0.1, 0.6, 0.3])
    assert kept.loglik(theta) == pytest.approx(merged.loglik(theta), rel=1e-13)
    assert (kept + merged).n == 12


def test_pickle_round_trip_packs_support_bits():
    """A tally survives pickling (Dask, process pools) unchanged; a support matrix travels as
    packed bits, an eighth of its bytes."""
    import pickle

    import bayesldp

    oue = bayesldp.OUE(64, 1.0)
    tally = oue.tally(oue.perturb(np.random.default_rng(0).integers(0, 64, 5000), rng=1))
    data = pickle.dumps(tally)
    back = pickle.loads(data)
    assert back == tally and back.support.dtype == bool and back.support.flags.c_contiguous
    assert len(data) < 1.1 * (tally.support.nbytes / 8 + tally.counts.nbytes)
    grr = bayesldp.GRR(5, 1.0).tally(np.array([0, 1, 2, 2, 4]))
    assert pickle.loads(pickle.dumps(grr)) == grr


def test_loglik_of_read_only_draws_reuses_the_compiled_kernel():
    """Draws read from an InferenceData are read-only arrays; the log-likelihood copies them,
    so numba never compiles its kernel a second time for read-only arguments (a first run
    compiles each specialisation for seconds)."""
    from bayesldp.likelihood_kernels import _loglik_batch

    tally = bayesldp.GRR(4, 1.0).simulate_tally(np.array([10, 20, 30, 40]), rng=0)
    draws = np.full((3, 4), 0.25)
    expected = tally.loglik(draws)
    before = len(_loglik_batch.signatures)
    draws.flags.writeable = False
    assert np.array_equal(tally.loglik(draws), expected)
    assert len(_loglik_batch.signatures) == before
