"""RAPPOR with Bloom filters and cohorts, over a candidate set of strings.

Erlingsson, Pihur and Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal
Response", ACM CCS 2014 (sections 3 and 4); the comparison with local hashing is Wang, Blocki,
Li and Jha, "Locally Differentially Private Protocols for Frequency Estimation", USENIX Security
2017.

The package in modules: :mod:`~bayesldp.mechanisms.rappor.mechanism` (the mechanism,
:class:`RAPPOR`, and its reports, :class:`RapporReports`; its module docstring describes the
client, the one-report channel, the budgets and the "other" category),
:mod:`~bayesldp.mechanisms.rappor.bloom` (google/rappor's Bloom hash family, :func:`bloom_bits`),
:mod:`~bayesldp.mechanisms.rappor.memo` (the permanent response memoised per (user, value):
``perturb(x, rng, users=ids, memo=mech.memo())``, as the longitudinal mechanisms)
and :mod:`~bayesldp.mechanisms.rappor.decode` (RAPPOR's own decoding, :func:`rappor_decode`, and
the tally that carries the bit counts it reads, :class:`RapporTally`, in
:mod:`~bayesldp.mechanisms.rappor.tally`).  Every name can be
imported from here.

Estimators.  Every likelihood estimator and posterior of the package reads the tally.  The
unbiased oracle debiases each bit count and regresses the result on the Bloom design (below);
:func:`rappor_decode` is RAPPOR's own decoding (non-negative LASSO selection, then least squares
with standard errors), which reads the per-cohort bit counts :meth:`RAPPOR.bit_counts`.  A
tally from :meth:`RAPPOR.tally` is a :class:`RapporTally`, which carries those bit counts beside
the likelihood rows (they cannot be recovered from the rows), so the same decoding is
``bayesldp.estimate(tally, "rappor_decode")`` (:func:`decode_tally`).
"""

from bayesldp.mechanisms.rappor.bloom import bloom_bits as bloom_bits
from bayesldp.mechanisms.rappor.decode import RapporDecoding as RapporDecoding
from bayesldp.mechanisms.rappor.decode import decode_tally as decode_tally
from bayesldp.mechanisms.rappor.decode import rappor_decode as rappor_decode
from bayesldp.mechanisms.rappor.mechanism import MAX_CHANNEL_COLUMNS as MAX_CHANNEL_COLUMNS
from bayesldp.mechanisms.rappor.mechanism import RAPPOR as RAPPOR
from bayesldp.mechanisms.rappor.mechanism import RapporReports as RapporReports
from bayesldp.mechanisms.rappor.tally import RapporTally as RapporTally
