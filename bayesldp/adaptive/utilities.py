"""The six utility functions of AdOBEst-LDP.

Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy With an
Adaptive Randomized Response Mechanism", ACM TKDD 2025, section "Utility Functions for Subset
Selection".

Each utility scores how useful one randomised response ``Y`` is when ``X ~ Categorical(theta)`` and
``Y | X = x ~ P[x, :]`` (the RRRR channel of a candidate subset).  All functions are vectorised:
``theta`` has shape (..., K) and ``channel`` shape (..., K, K) (a stack of candidate channels), and
the result has the broadcast batch shape.  With ``p_Y = theta P`` the law of ``Y``:

1. ``fisher``: ``-trace(F^-1)``, ``F`` the Fisher information of one report about the first K-1
   coordinates of theta (``theta_K = 1 - sum``): ``F = sum_y d_y d_y^T / p_Y(y)`` with
   ``d_y[j] = P[j, y] - P[K-1, y]``.  A singular ``F`` (a direction the report says nothing about)
   scores ``-inf``.
2. ``entropy``: ``-H(Y) = sum_y p_Y(y) log p_Y(y)``.  The slides print ``H(Y)``; the authors'
   reference code maximises ``-H(Y)``, which is the choice that rewards responses concentrated on
   the high-probability set (maximising ``+H(Y)`` would always favour the flattest response law,
   plain SRR, defeating the adaptation).  We follow the code and say so here.
3. ``expected_tv``: ``E_Y[TV(Pr(X | Y, theta), Pr(X | theta))]
   = 1/2 sum_y sum_x |theta_x P[x, y] - theta_x p_Y(y)|``.
4. ``tv``: ``-TV(p_Y, theta) = -1/2 sum_x |p_Y(x) - theta_x|``.
5. ``mse``: ``-min_f E||e_X - f(Y)||^2 = -(1 - sum_y sum_x (theta_x P[x, y])^2 / p_Y(y))``
   (the minimiser is the posterior mean ``E[e_X | Y]``).
6. ``honest``: ``Pr(Y = X) = sum_x theta_x P[x, x]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bayesldp.errors import InvalidInputError


def _prepare(theta, channel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    theta = np.asarray(theta, dtype=float)
    channel = np.asarray(channel, dtype=float)
    if channel.shape[-1] != channel.shape[-2] or theta.shape[-1] != channel.shape[-1]:
        raise InvalidInputError(
            f"channel: expected shape (..., K, K) matching theta (..., K); got {channel.shape} "
            f"and {theta.shape}"
        )
    p_y = np.einsum("...x,...xy->...y", theta, channel)
    return theta, channel, p_y


def fisher(theta, channel) -> np.ndarray:
    """U1: minus the trace of the inverse Fisher information of one report."""
    theta, channel, p_y = _prepare(theta, channel)
    d = channel[..., :-1, :] - channel[..., -1:, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(p_y > 0, 1.0 / p_y, 0.0)
    info = np.einsum("...jy,...ly,...y->...jl", d, d, weights)
    batch = info.shape[:-2]
    flat = info.reshape(-1, *info.shape[-2:])
    out = np.full(flat.shape[0], -np.inf)
    eigmin = np.linalg.eigvalsh(flat)[:, 0]
    scale = np.abs(flat).max(axis=(1, 2))
    ok = eigmin > 1e-12 * scale
    if ok.any():
        out[ok] = -np.trace(np.linalg.inv(flat[ok]), axis1=1, axis2=2)
    return out.reshape(batch)


def entropy(theta, channel) -> np.ndarray:
    """U2: minus the entropy of the response, ``sum_y p_Y(y) log p_Y(y)``."""
    _, _, p_y = _prepare(theta, channel)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p_y > 0, p_y * np.log(p_y), 0.0)
    return terms.sum(axis=-1)


def expected_tv(theta, channel) -> np.ndarray:
    """U3: expected TV distance between the posterior and the prior of ``X`` after one report."""
    theta, channel, p_y = _prepare(theta, channel)
    joint = theta[..., :, None] * channel
    return 0.5 * np.abs(joint - theta[..., :, None] * p_y[..., None, :]).sum(axis=(-2, -1))


def tv(theta, channel) -> np.ndarray:
    """U4: minus the TV distance between the laws of ``Y`` and ``X``."""
    theta, _, p_y = _prepare(theta, channel)
    return -0.5 * np.abs(p_y - theta).sum(axis=-1)


def mse(theta, channel) -> np.ndarray:
    """U5: minus the minimal expected squared error of recovering ``e_X`` from ``Y``."""
    theta, channel, p_y = _prepare(theta, channel)
    joint = theta[..., :, None] * channel
    with np.errstate(divide="ignore", invalid="ignore"):
        per_y = np.where(p_y > 0, (joint**2).sum(axis=-2) / p_y, 0.0)
    return -(1.0 - per_y.sum(axis=-1))


def honest(theta, channel) -> np.ndarray:
    """U6: the probability of an honest response, ``Pr(Y = X)``."""
    theta, channel, _ = _prepare(theta, channel)
    return np.einsum("...x,...xx->...", theta, channel)


UTILITIES: dict[str, Callable[..., np.ndarray]] = {
    "fisher": fisher,
    "entropy": entropy,
    "expected_tv": expected_tv,
    "tv": tv,
    "mse": mse,
    "honest": honest,
}
"""The six utilities by name, in the order of the paper (U1..U6)."""


def get_utility(name: str) -> Callable[..., np.ndarray]:
    """Look up a utility by name (``"fisher"``, ``"entropy"``, ..., or ``"U1"`` to ``"U6"``).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.adaptive import get_utility
    >>> tv = get_utility("tv")
    >>> theta = np.array([0.6, 0.3, 0.1])
    >>> round(float(tv(theta, bayesldp.GRR(3, 1.0).channel)), 4)
    -0.1696
    """
    names = list(UTILITIES)
    if isinstance(name, str) and name.upper() in {f"U{i}" for i in range(1, 7)}:
        return UTILITIES[names[int(name[1]) - 1]]
    if name not in UTILITIES:
        raise InvalidInputError(f"utility: unknown {name!r}; valid: {', '.join(names)} or U1..U6")
    return UTILITIES[name]
