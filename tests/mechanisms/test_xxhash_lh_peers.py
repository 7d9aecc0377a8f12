"""BLHXX / OLHXX read the reports of pure-ldp's and multi-freq-ldpy's own local-hashing clients.

Marked ``external``: needs the peers (``pip install -e ".[bench]"``) and python-xxhash < 4, which
both need to hash ``str`` values; skipped where they are missing.
"""

import math
import random

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.mechanisms.xxhash_lh import BLHXX, OLHXX, SeedReports
from bayesldp.workflows.report_files import read_reports

pytestmark = pytest.mark.external

K, EPSILON, N = 8, 2.0, 20_000
THETA = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])


@pytest.fixture(scope="module")
def xxhash():
    module = pytest.importorskip("xxhash")
    if int(module.VERSION.split(".")[0]) >= 4:
        pytest.skip("the peers hash str values, which xxhash >= 4 refuses: pip install 'xxhash<4'")
    return module


@pytest.fixture
def global_seed():
    """Seed the legacy global generators the peers draw from; restore them afterwards."""
    state, np_state = random.getstate(), np.random.get_state()  # noqa: NPY002

    def seed(value):
        random.seed(value)
        np.random.seed(value)  # noqa: NPY002

    yield seed
    random.setstate(state)
    np.random.set_state(np_state)  # noqa: NPY002


def _values(seed):
    counts = (THETA * N).astype(int)
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(K), counts))


def _mechanism(optimal):
    mech = OLHXX(K, EPSILON) if optimal else BLHXX(K, EPSILON)
    assert mech.g == (round(math.exp(EPSILON)) + 1 if optimal else 2)  # the peers' g
    return mech


def _assert_close_to_truth(mech, tally):
    sd = np.sqrt(mech.oracle_variance(THETA, tally.n))
    for method in ["mle", "oracle"]:
        est = bayesldp.estimate(tally, method=method).frequencies
        assert np.all(np.abs(est - THETA) < 5 * sd), (method, (est - THETA) / sd)


@pytest.mark.parametrize("optimal", [True, False], ids=["olh", "blh"])
def test_pure_ldp_clients(xxhash, optimal, global_seed):
    local_hashing = pytest.importorskip("pure_ldp.frequency_oracles.local_hashing")
    global_seed(1)  # pure-ldp draws seeds with random, perturbs with np.random
    g = 2
    client = local_hashing.LHClient(EPSILON, K, g=g, use_olh=optimal)
    server = local_hashing.LHServer(EPSILON, K, g=g, use_olh=optimal)
    x = _values(2)
    pairs = [client.privatise(int(v) + 1) for v in x]  # default index_mapper: data 1..K -> 0..K-1
    for pair in pairs:
        server.aggregate(pair)
    mech = _mechanism(optimal)
    assert client.g == server.g == mech.g
    reports = SeedReports(*(np.array(col, dtype=np.int64) for col in zip(*pairs, strict=True)))
    assert reports.seed.max() >= 2**32  # 63-bit seeds: only their residue mod 2^32 matters
    tally = mech.tally(reports)
    # their support counts (xxh32(str(x), seed) % g == y over K x N pairs) equal ours exactly
    np.testing.assert_array_equal(tally.stat, server.aggregated_data)
    # their estimate (counts, q* = 1/g) is our oracle times n
    theirs = server.estimate_all(range(1, K + 1), suppress_warnings=True)
    np.testing.assert_allclose(mech.unbiased_frequencies(tally) * N, theirs, rtol=1e-9, atol=1e-6)
    _assert_close_to_truth(mech, tally)


@pytest.mark.parametrize("optimal", [True, False], ids=["olh", "blh"])
def test_multi_freq_ldpy_clients(xxhash, optimal, tmp_path, global_seed):
    lh = pytest.importorskip("multi_freq_ldpy.pure_frequency_oracles.LH")
    global_seed(3)  # its seeds (its GRR step draws from numba's own generator)
    x = _values(4)
    pairs = [lh.LH_Client(int(v), K, EPSILON, optimal=optimal) for v in x]
    mech = _mechanism(optimal)
    path = tmp_path / "multi_freq_ldpy.csv"
    pd.DataFrame([(int(y), int(s)) for y, s in pairs], columns=["y", "seed"]).to_csv(path)
    again, tally = read_reports(path, "OLHXX" if optimal else "BLHXX", k=K, epsilon=EPSILON)
    assert again == mech
    # our hash of (value, seed) equals the peer's own call, xxh32(str(v), seed=seed) % g
    reports = SeedReports(*(np.array(col, dtype=np.int64) for col in zip(*pairs, strict=True)))
    for v in range(K):
        theirs = [xxhash.xxh32(str(v), seed=s).intdigest() % mech.g for _, s in pairs[:5000]]
        np.testing.assert_array_equal(mech.hash_values(reports, v)[:5000], theirs)
    # their MI estimate is our oracle (q* = 1/g), clipped at 0 and renormalised
    clipped = np.clip(mech.unbiased_frequencies(tally), 0, None) * N
    theirs = lh.LH_Aggregator_MI(pairs, K, EPSILON, optimal=optimal)
    np.testing.assert_allclose(theirs, clipped / clipped.sum(), rtol=1e-9, atol=1e-12)
    _assert_close_to_truth(mech, tally)
