import numpy as np
import pytest

from bayesldp.adaptive import utilities as U


def random_case(k, seed):
    gen = np.random.default_rng(seed)
    theta = gen.dirichlet(np.ones(k))
    channel = gen.dirichlet(np.ones(k), size=k)
    return theta, channel


def simulate(theta, channel, n, seed):
    gen = np.random.default_rng(seed)
    x = gen.choice(len(theta), size=n, p=theta)
    cdf = np.cumsum(channel, axis=1)
    y = (gen.random(n)[:, None] > cdf[x]).sum(axis=1)
    return x, np.minimum(y, len(theta) - 1)


N = 400_000


@pytest.mark.parametrize("seed", [0, 1])
def test_utilities_match_monte_carlo(seed):
    k = 4
    theta, channel = random_case(k, seed)
    x, y = simulate(theta, channel, N, seed + 10)
    p_y = theta @ channel
    post = (theta[:, None] * channel / p_y).T  # post[y, x] = Pr(X = x | Y = y)
    # U6: Pr(Y = X)
    hits = (x == y).astype(float)
    assert abs(U.honest(theta, channel) - hits.mean()) < 4 * hits.std() / np.sqrt(N)
    # U2: E[log p_Y(Y)]
    logs = np.log(p_y[y])
    assert abs(U.entropy(theta, channel) - logs.mean()) < 4 * logs.std() / np.sqrt(N)
    # U3: E_Y TV(post(.|Y), theta)
    tvs = 0.5 * np.abs(post[y] - theta).sum(axis=1)
    assert abs(U.expected_tv(theta, channel) - tvs.mean()) < 4 * tvs.std() / np.sqrt(N)
    # U4: -TV(law of Y, law of X) from empirical laws
    emp = -0.5 * np.abs(np.bincount(y, minlength=k) / N - theta).sum()
    assert abs(U.tv(theta, channel) - emp) < 0.01
    # U5: squared error of the posterior mean of e_X
    err = ((np.eye(k)[x] - post[y]) ** 2).sum(axis=1)
    assert abs(U.mse(theta, channel) + err.mean()) < 4 * err.std() / np.sqrt(N)
    # U1: Fisher information as the covariance of the score
    d = channel[:-1] - channel[-1]
    score = (d[:, y] / p_y[y]).T
    info_mc = score.T @ score / N
    assert U.fisher(theta, channel) == pytest.approx(-np.trace(np.linalg.inv(info_mc)), rel=0.03)


def test_closed_forms_by_hand_k3():
    theta = np.array([0.5, 0.3, 0.2])
    channel = np.array([[0.6, 0.2, 0.2], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]])
    assert U.honest(theta, channel) == pytest.approx(0.5 * 0.6 + 0.3 * 0.8 + 0.2 * 0.5)
    # p_Y = (0.38, 0.39, 0.23); joint column sums of squares / p_Y
    p_y = np.array([0.3 + 0.03 + 0.05, 0.1 + 0.24 + 0.05, 0.1 + 0.03 + 0.1])
    col0 = (0.3**2 + 0.03**2 + 0.05**2) / p_y[0]
    col1 = (0.1**2 + 0.24**2 + 0.05**2) / p_y[1]
    col2 = (0.1**2 + 0.03**2 + 0.1**2) / p_y[2]
    assert U.mse(theta, channel) == pytest.approx(-(1 - col0 - col1 - col2), rel=1e-12)
    assert U.tv(theta, channel) == pytest.approx(-0.5 * np.abs(p_y - theta).sum(), rel=1e-12)


def test_identity_channel_is_best_and_uniform_channel_worst():
    theta = np.array([0.6, 0.3, 0.1])
    stack = np.stack([np.eye(3), np.full((3, 3), 1 / 3)])
    assert np.all(np.isneginf(U.fisher(theta, stack)[1]))
    for name, fn in U.UTILITIES.items():
        scores = fn(theta, stack)
        assert scores.shape == (2,)
        assert scores[0] >= scores[1] - 1e-12, name
    assert U.honest(theta, stack)[0] == pytest.approx(1.0)
    assert U.mse(theta, stack)[0] == pytest.approx(0.0, abs=1e-12)


def test_batched_equals_loop():
    theta, _ = random_case(5, 3)
    channels = np.stack([random_case(5, s)[1] for s in range(6)])
    for fn in U.UTILITIES.values():
        batched = fn(theta, channels)
        looped = np.array([fn(theta, c) for c in channels])
        np.testing.assert_allclose(batched, looped, rtol=1e-12)


def test_lookup():
    assert U.get_utility("U6") is U.honest
    assert U.get_utility("fisher") is U.fisher
    with pytest.raises(ValueError, match="unknown"):
        U.get_utility("nope")
    with pytest.raises(ValueError, match="shape"):
        U.honest(np.ones(3) / 3, np.eye(4))
