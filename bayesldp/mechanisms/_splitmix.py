"""SplitMix64 (Steele, Lea and Flood, OOPSLA 2014), compiled and in Python (internal).

Used two ways.  As a *hash*: :func:`splitmix64` maps an integer to a well-mixed 64-bit word
(the seeded hash family of the count-mean sketches).  As a *counter-based generator* inside
numba kernels: output ``t`` of the stream seeded with ``s`` is ``mix64(s + t * GOLDEN)``, so a
kernel can draw its uniforms in the loop that uses them, from one seed taken from the caller's
``numpy.random.Generator`` (same seed, same bits).  Uniform doubles are ``(u64 >> 11) 2^-53``,
as numpy's ``Generator.random``; a Bernoulli(``p``) draw is ``(u64 >> 11) < ceil(p 2^53)``,
exactly ``Pr[u < p]`` for that uniform.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


@njit(cache=True)
def mix64(z):  # pragma: no cover - compiled
    """The SplitMix64 finaliser of a uint64."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def splitmix64(seed: int, t: int) -> int:
    """Output ``t`` (``t >= 1``) of the SplitMix64 stream seeded with ``seed`` (Python ints)."""
    z = (seed + t * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def bernoulli_threshold(p: float) -> np.uint64:
    """``ceil(p 2^53)``: ``(u64 >> 11) < threshold`` has probability exactly ``Pr[U < p]`` for
    the 53-bit uniform ``U = (u64 >> 11) 2^-53``."""
    return np.uint64(min(math.ceil(p * 2.0**53), 2**53))


def stream_seed(gen: np.random.Generator) -> np.uint64:
    """One 64-bit seed for a kernel's stream, drawn from ``gen``."""
    return np.uint64(gen.integers(0, 2**64, dtype=np.uint64))
