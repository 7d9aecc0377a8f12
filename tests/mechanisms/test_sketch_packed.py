"""Count-mean-sketch reports packed one bit per entry: the same stream as the int8 client
(``np.packbits(..., bitorder="little")`` of its reports), the same tallies and tables, and
packed reports of the wrong shape, dtype, width or padding refused in one line."""

import pickle

import numpy as np
import pytest

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.sketch import CMS, CMSReports


def _users(k, n, seed=0):
    x = np.random.default_rng(seed).integers(0, k, n)
    x[:k] = np.arange(k)
    return x


@pytest.mark.parametrize("m", [1024, 1000, 13, 8])
def test_packed_client_is_the_packbits_of_the_int8_client(m):
    mech = CMS(40, 3.0, m=m, k_hash=8)
    x = _users(40, 3000)
    bits, packed = mech.perturb(x, rng=7), mech.perturb(x, rng=7, packed=True)
    assert not bits.is_packed and packed.is_packed and packed.m == m == bits.m
    assert packed.packed.dtype == np.uint8 and packed.packed.shape == (3000, (m + 7) // 8)
    np.testing.assert_array_equal(packed.row, bits.row)
    np.testing.assert_array_equal(packed.packed, np.packbits(bits.bits > 0, axis=1,
                                                             bitorder="little"))  # fmt: skip
    unpacked = packed.bits
    assert unpacked.dtype == np.int8
    np.testing.assert_array_equal(unpacked, bits.bits)
    np.testing.assert_array_equal(bits.packed, packed.packed)  # int8 reports pack on access
    # the one-hot bucket with each entry flipped w.p. f: f + (1 - 2 f) / m of them are +1
    expected = mech.flip + (1 - 2 * mech.flip) / m
    assert abs((unpacked > 0).mean() - expected) < 5 * np.sqrt(0.25 / unpacked.size)


@pytest.mark.parametrize("m", [64, 1000])
def test_membership_tally_and_tables_are_those_of_the_int8_reports(m):
    mech = CMS(30, 2.0, m=m, k_hash=4)
    x = _users(30, 2000, seed=1)
    bits, packed = mech.perturb(x, rng=2), mech.perturb(x, rng=2, packed=True)
    np.testing.assert_array_equal(mech.membership(packed), mech.membership(bits))
    first, second = mech.tally(bits), mech.tally(packed)
    np.testing.assert_array_equal(first.stat, second.stat)
    np.testing.assert_array_equal(mech.unbiased_frequencies(first),
                                  mech.unbiased_frequencies(second))  # fmt: skip
    rows, entries = mech.check_reports(packed)
    np.testing.assert_array_equal(entries, bits.bits)
    np.testing.assert_array_equal(rows, bits.row)
    frame = mech.reports_to_frame(packed)
    assert frame.equals(mech.reports_to_frame(bits))
    back = mech.reports_from_frame(frame)
    np.testing.assert_array_equal(back.bits, bits.bits)
    np.testing.assert_array_equal(mech.supports(packed, 3), mech.supports(bits, 3))


def test_subset_pack_and_pickle_keep_the_form():
    mech = CMS(10, 1.0, m=20, k_hash=3)
    bits = mech.perturb(_users(10, 500), rng=4)
    packed = bits.pack()
    assert packed.is_packed and packed.pack() is packed and len(packed) == 500
    mask = np.arange(500) % 3 == 0
    part = packed.subset(mask)
    assert part.is_packed and len(part) == mask.sum()
    np.testing.assert_array_equal(part.bits, bits.subset(mask).bits)
    np.testing.assert_array_equal(part.row, bits.row[mask])
    again = pickle.loads(pickle.dumps(packed))
    np.testing.assert_array_equal(again.packed, packed.packed)
    assert again.m == 20 and repr(again) == "CMSReports(500 reports, packed, m=20)"


def _one_line(err):
    assert "\n" not in str(err.value)


def test_bad_packed_reports_are_refused_in_one_line():
    mech = CMS(10, 1.0, m=12, k_hash=3)  # 2 bytes a report, the last 4 bits padding
    good = mech.perturb(_users(10, 50), rng=5, packed=True)
    row, packed = good.row, good.packed
    cases = [
        (CMSReports(row, packed=packed.astype(np.int8), m=12), InvalidTypeError,
         r"reports.packed: expected uint8"),
        (CMSReports(row, packed=packed[:, :1], m=12), InvalidInputError,
         r"reports.packed: expected shape \(50, 2\)"),
        (CMSReports(row[:-1], packed=packed, m=12), InvalidInputError,
         r"reports.packed: expected shape \(49, 2\)"),
        (CMSReports(row, packed=packed, m=16), InvalidInputError,
         r"reports.m: the packed reports hold m = 16 entries each, this sketch has m = 12"),
    ]  # fmt: skip
    padded = packed.copy()
    padded[7, 1] |= 0x20  # bit 13: entry 13 of 12
    cases.append((CMSReports(row, packed=padded, m=12), InvalidInputError,
                  r"reports.packed: report 7 sets padding bits \(last byte 0x2"))  # fmt: skip
    for reports, error, message in cases:
        for read in (mech.tally, mech.check_reports, mech.reports_to_frame):
            with pytest.raises(error, match=message) as err:
                read(reports)
            _one_line(err)
    # the int8 reports' own checks are unchanged
    with pytest.raises(InvalidInputError, match=r"reports.bits: expected shape"):
        mech.tally(CMSReports(row, good.bits[:, :7]))


def test_reports_are_given_their_entries_once():
    row, packed = np.zeros(2, dtype=np.int64), np.zeros((2, 1), dtype=np.uint8)
    bits = np.ones((2, 8), dtype=np.int8)
    for kwargs, error, message in [
        ({}, InvalidTypeError, "give the entries once"),
        ({"bits": bits, "packed": packed, "m": 8}, InvalidTypeError, "give the entries once"),
        ({"packed": packed}, InvalidInputError, "m: packed reports need their entry count"),
        ({"packed": packed, "m": 0}, InvalidInputError, "m: packed reports need their entry count"),
        ({"bits": bits, "m": 8}, InvalidInputError, "m: only with packed="),
    ]:
        with pytest.raises(error, match=message) as err:
            CMSReports(row, **kwargs)
        _one_line(err)
