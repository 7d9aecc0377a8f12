"""The tally of :meth:`RAPPOR.tally <bayesldp.mechanisms.rappor.mechanism.RAPPOR.tally>`: the
likelihood rows and, beside them, the per-cohort bit counts that RAPPOR's own decoding reads
(:mod:`bayesldp.mechanisms.rappor.decode`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally


class RapporTally(Tally):
    """A RAPPOR tally that also carries the per-cohort bit counts.

    The likelihood rows of a RAPPOR tally do not determine which cohort and bits each report
    had, so RAPPOR's own decoding (:func:`rappor_decode`, ``estimate(tally, "rappor_decode")``)
    needs the aggregates :meth:`RAPPOR.bit_counts` beside them: ``bit_counts`` (int64,
    ``(m, 1 + num_bits)``, google/rappor's counts layout).  Adding two tallies of the same
    mechanism adds them; anything else (a merge with another mechanism's tally, a tally read
    back from a tally store) is a plain :class:`~bayesldp.Tally`, which every likelihood
    estimator and the oracle read as before and ``"rappor_decode"`` refuses with a clear error.
    Equality also compares the bit counts.
    """

    def __init__(self, counts: Any, *, bit_counts: Any, **kwargs: Any) -> None:
        super().__init__(counts, **kwargs)
        mech = self.mechanism
        if getattr(mech, "name", None) != "RAPPOR":  # the class: rappor.mechanism.RAPPOR
            raise InvalidTypeError(
                f"mechanism: a RapporTally needs a bayesldp.RAPPOR, got {type(mech).__name__}"
            )
        bit_counts = np.asarray(bit_counts)
        shape = (mech.cohorts, 1 + mech.num_bits)
        if bit_counts.shape != shape or bit_counts.dtype.kind not in "iu":
            raise InvalidInputError(
                f"bit_counts: expected integer counts of shape {shape} (per cohort: reports, "
                f"then the {mech.num_bits} bit sums), got {bit_counts.dtype} {bit_counts.shape}"
            )
        if int(bit_counts[:, 0].sum()) != self.n:
            raise InvalidInputError(
                f"bit_counts: the cohorts hold {int(bit_counts[:, 0].sum())} reports but the "
                f"tally {self.n}"
            )
        self.bit_counts = bit_counts.astype(np.int64)

    @classmethod
    def _wrap(cls, tally: Tally, bit_counts: np.ndarray) -> RapporTally:
        out = object.__new__(cls)
        for name in Tally.__slots__:
            setattr(out, name, getattr(tally, name))
        out.bit_counts = bit_counts
        return out

    def __add__(self, other: object) -> Tally:
        merged = Tally.__add__(self, other)
        if (
            isinstance(merged, Tally)
            and merged is not self
            and isinstance(other, RapporTally)
            and merged.mechanism is not None
            and merged.mechanism == self.mechanism
        ):
            return RapporTally._wrap(merged, self.bit_counts + other.bit_counts)
        return merged

    __radd__ = __add__

    def deduplicated(self) -> Tally:
        """This tally with identical rows merged (the bit counts kept)."""
        if self._deduped:
            return self
        return RapporTally._wrap(Tally.deduplicated(self), self.bit_counts)

    def __eq__(self, other: object) -> bool:
        same = Tally.__eq__(self, other)
        if same is not True or not isinstance(other, RapporTally):
            return same
        return bool(np.array_equal(self.bit_counts, other.bit_counts))

    __hash__ = None

    def __getstate__(self) -> dict[str, Any]:
        state = Tally.__getstate__(self)
        state["bit_counts"] = self.bit_counts
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.bit_counts = state.pop("bit_counts")
        Tally.__setstate__(self, state)
