"""RAPPOR with Bloom filters and cohorts, over a candidate set of strings.

The mechanism, its decoding and their documentation are in
:mod:`~bayesldp.mechanisms.rappor.mechanism`; every name can be imported from here.
"""

from bayesldp.mechanisms.rappor.mechanism import MAX_CHANNEL_COLUMNS as MAX_CHANNEL_COLUMNS
from bayesldp.mechanisms.rappor.mechanism import RAPPOR as RAPPOR
from bayesldp.mechanisms.rappor.mechanism import RapporDecoding as RapporDecoding
from bayesldp.mechanisms.rappor.mechanism import RapporReports as RapporReports
from bayesldp.mechanisms.rappor.mechanism import RapporTally as RapporTally
from bayesldp.mechanisms.rappor.mechanism import bloom_bits as bloom_bits
from bayesldp.mechanisms.rappor.mechanism import decode_tally as decode_tally
from bayesldp.mechanisms.rappor.mechanism import rappor_decode as rappor_decode
