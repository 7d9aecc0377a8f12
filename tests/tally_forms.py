"""Small tallies of the three likelihood forms (finite channel, support, dense rows), shared
by the model and pointwise log-likelihood tests."""

import numpy as np

import bayesldp
from bayesldp.tally import Tally


def three_forms(grr_counts, top: int) -> dict:
    """A GRR tally of ``grr_counts`` (K = 4; a zero is a report value never observed), a
    support-form tally of 9 rows and a dense one of 6, their counts drawn in ``1..top - 1``."""
    gen = np.random.default_rng(0)
    grr = bayesldp.GRR(4, 1.0).tally_from_report_counts(grr_counts)
    support = gen.random((9, 4)) < 0.5
    support[:, 1] |= ~support.any(axis=1)
    sup = Tally(gen.integers(1, top, 9), support=support, levels=(0.3, 1.2), stat=np.zeros(4),
                family="test-support")  # fmt: skip
    dense = Tally(gen.integers(1, top, 6), rows=gen.random((6, 4)), stat=np.zeros(4),
                  family="test-dense")  # fmt: skip
    return {"grr": grr, "support": sup, "dense": dense}
