"""The identity of a batch of reports: the same rows give one digest whatever the encoding, a
prefix's digest is the digest of the batch it was, other rows give another digest."""

import numpy as np
import pandas as pd
import pytest

from bayesldp.workflows import batch_identity
from bayesldp.workflows.batch_identity import batch_content


def test_same_rows_in_other_dtypes_and_column_orders_are_one_batch():
    bits = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0]])
    as_int = pd.DataFrame(bits, columns=["0", "1", "2"])
    as_bool = pd.DataFrame(bits.astype(bool), columns=["0", "1", "2"])
    as_float = as_int.astype(float)[["2", "0", "1"]]
    with_bom = as_int.rename(columns={"0": "\ufeff0"})
    digests = {batch_content(f).digest for f in (as_int, as_bool, as_float, with_bom)}
    assert len(digests) == 1
    other = as_int.copy()
    other.iloc[2, 1] = 0
    assert batch_content(other).digest not in digests
    renamed = as_int.rename(columns={"2": "3"})
    assert batch_content(renamed).digest not in digests
    assert batch_content(as_int.iloc[[1, 0, 2]]).digest not in digests  # order is identity


@pytest.mark.parametrize("chunk", [1, 3, 4, 1 << 16])
def test_prefix_digests_across_chunks(monkeypatch, chunk):
    """The digest of the first m rows of a grown table equals the digest of the m-row table,
    wherever the hashing chunks end; floats, text and integers alike."""
    monkeypatch.setattr(batch_identity, "CHUNK_ROWS", chunk)
    rng = np.random.default_rng(3)
    frames = [
        pd.DataFrame({"report": rng.integers(0, 5, 11)}),
        pd.DataFrame({"report": rng.normal(size=11), "w": rng.integers(0, 2, 11)}),
        pd.DataFrame({"cohort": rng.integers(0, 3, 11),
                      "bits": ["01", "10", "11", "0"] * 2 + ["1"] * 3}),
    ]
    for frame in frames:
        grown = batch_content(frame)
        lengths = [1, 4, 7, 11]
        prefixes = grown.prefix_digests(lengths)
        assert prefixes == {m: batch_content(frame.iloc[:m]).digest for m in lengths}
        assert len(set(prefixes.values())) == len(lengths)


def test_large_unsigned_and_negative_zero():
    big = pd.DataFrame({"a": np.array([2**64 - 1, 5], dtype=np.uint64)})  # beyond int64: text
    assert batch_content(big).digest != batch_content(pd.DataFrame({"a": [-1, 5]})).digest
    zeros = pd.DataFrame({"x": [0.5, -0.0]})
    assert batch_content(zeros).digest == batch_content(pd.DataFrame({"x": [0.5, 0.0]})).digest
