"""A population with five clear heavy hitters, shared by the discovery tests (SFP, TreeHist)."""

import functools

import numpy as np

HEAVY = np.array(["apple", "pear", "kiwi", "plum", "fig"], dtype=object)
SHARES = np.array([0.2, 0.15, 0.1, 0.08, 0.06])


@functools.cache
def clear_population(tail: int = 5000):
    """Five heavy hitters (shares 0.2 .. 0.06) and a Zipf(0.6) tail of ``tail`` items holding
    the other 0.41 (its largest item 0.0055)."""
    w = 1.0 / np.arange(1, tail + 1) ** 0.6
    items = np.r_[HEAVY, np.array([f"t{i}" for i in range(tail)], dtype=object)]
    return items, np.r_[SHARES, 0.41 * w / w.sum()]


def draw(n: int, seed: int):
    """``n`` users' items from :func:`clear_population` and the Generator that drew them."""
    items, w = clear_population()
    rng = np.random.default_rng(seed)
    return items[rng.choice(items.size, size=n, p=w)], rng
