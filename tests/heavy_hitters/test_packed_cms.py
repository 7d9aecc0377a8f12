"""SFP's fragment users packed one bit per sketch entry: the same reports as the int8 client for
the same seed, and the same counts, estimates, found items and report files from either form."""

import dataclasses

import numpy as np
import pytest

from bayesldp.heavy_hitters import SFP, CandidateCMS
from bayesldp.heavy_hitters._counting import bucket_counts, packed_bucket_counts
from bayesldp.mechanisms.sketch import CMSReports
from tests.heavy_hitters.populations import draw


def _int8(reports):
    return CMSReports(reports.row, reports.bits)


@pytest.mark.parametrize("m", [64, 1000])
def test_packed_bucket_counts_equal_the_int8_counts(m):
    rng = np.random.default_rng(5)
    n, k_hash, n_groups = 3000, 8, 3
    group, rows = rng.integers(0, n_groups, n), rng.integers(0, k_hash, n)
    bits = np.where(rng.random((n, m)) < 0.3, 1, -1).astype(np.int8)
    packed = np.packbits(bits > 0, axis=1, bitorder="little")
    counts = packed_bucket_counts(group, rows, packed, m, n_groups, k_hash)
    assert counts.shape == (n_groups, k_hash, m)
    np.testing.assert_array_equal(counts, bucket_counts(group, rows, bits, n_groups, k_hash))
    assert counts.sum() == (bits > 0).sum()


@pytest.mark.parametrize("m", [1024, 1000])
def test_candidate_cms_packed_reports_read_as_the_int8_ones(m):
    mech = CandidateCMS([5, 17, 2**24 + 3, 99, 12345], 2.0, m=m, k_hash=8)
    rng = np.random.default_rng(9)
    values = rng.choice([5, 17, 40, 2**24 + 3, 7], 4000)
    packed = mech.perturb_values(values, rng=10)
    bits = mech.perturb_values(values, rng=10, packed=False)
    assert packed.is_packed and not bits.is_packed
    np.testing.assert_array_equal(packed.packed, np.packbits(bits.bits > 0, axis=1,
                                                             bitorder="little"))  # fmt: skip
    np.testing.assert_array_equal(packed.row, bits.row)
    np.testing.assert_array_equal(mech.support_counts(packed), mech.support_counts(bits))
    np.testing.assert_array_equal(mech.support_counts(packed), mech.tally(bits).stat)
    np.testing.assert_array_equal(mech.sketch_estimate(packed), mech.sketch_estimate(bits))
    group = rng.integers(0, 3, len(bits))
    grouped = mech.grouped_counts(group, packed.row, packed.packed, 3, packed=True)
    np.testing.assert_array_equal(grouped, mech.grouped_counts(group, bits.row, bits.bits, 3))


@pytest.fixture(scope="module")
def people():
    return draw(20_000, 0)[0]


def test_sfp_identify_is_the_same_on_packed_and_int8_reports(people):
    sfp = SFP(4.0, 3, max_length=5, m=1000, holdout=0.1)
    reports = sfp.perturb(people, rng=1)
    frag = reports.fragments
    assert frag.is_packed and frag.packed.nbytes == len(frag) * 125
    as_int8 = dataclasses.replace(reports, fragments=_int8(frag))
    found, again = sfp.identify(reports), sfp.identify(as_int8)
    assert found.items == again.items and found.n_candidates == again.n_candidates
    np.testing.assert_array_equal(found.codes, again.codes)
    np.testing.assert_array_equal(found.frequencies, again.frequencies)
    for mine, theirs in zip(found.rounds, again.rounds, strict=True):
        np.testing.assert_array_equal(mine.values, theirs.values)
        np.testing.assert_array_equal(mine.frequencies, theirs.frequencies)
    assert len(found.items) == 3  # the search found something to compare
    for pos in range(sfp.n_positions):
        part = reports.at(pos)
        assert part.is_packed
        np.testing.assert_array_equal(part.bits, as_int8.at(pos).bits)
    assert reports.to_frame().equals(as_int8.to_frame())


def test_sfp_report_file_round_trip_keeps_the_packed_reports(people, tmp_path):
    from bayesldp.workflows.heavy_hitter_files import read_sfp_reports

    sfp = SFP(4.0, 3, max_length=5, m=1000)
    reports = sfp.perturb(people, rng=2)
    path = reports.to_file(tmp_path / "sfp.csv")
    back = read_sfp_reports(path, sfp)
    assert back.fragments.is_packed and back.fragments.m == 1000
    np.testing.assert_array_equal(back.fragments.packed, reports.fragments.packed)
    np.testing.assert_array_equal(back.fragments.row, reports.fragments.row)
    found, again = sfp.identify(reports), sfp.identify(back)
    assert found.items == again.items
    np.testing.assert_array_equal(found.frequencies, again.frequencies)
