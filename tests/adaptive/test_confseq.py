"""Anytime-valid confidence sequences by betting: they cover at every time at once, under
channels chosen from the reports so far, and a survey can stop on their width."""

import numpy as np
import pytest
from scipy import stats

from bayesldp import GRR, RRRR
from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.adaptive.confseq import BettingConfidenceSequences
from bayesldp.errors import InvalidInputError

THETA = np.array([0.55, 0.3, 0.1, 0.05])


def _counts(channel, n, gen):
    """The report counts of ``n`` users from THETA through ``channel``."""
    truth = gen.multinomial(n, THETA)
    return sum(gen.multinomial(m, row) for m, row in zip(truth, channel, strict=True))


def _ever_missed(replications, batches, choose, seed, target_width=None):
    """Per replication and category: whether the sequence excluded THETA at some batch."""
    gen = np.random.default_rng(seed)
    missed = np.zeros((replications, THETA.size), dtype=bool)
    for r in range(replications):
        sequences = BettingConfidenceSequences(THETA.size, alpha=0.1, target_width=target_width)
        for _ in range(batches):
            lower, upper = sequences.intervals()
            channel = choose(lower, upper)
            sequences.update(channel, _counts(channel, 200, gen))
            lower, upper = sequences.intervals()
            missed[r] |= (THETA < lower) | (THETA > upper)
    return missed


def _adaptive(lower, upper):
    """RRRR on the category whose sequence is highest so far (a choice made from the past)."""
    return RRRR(THETA.size, 1.0, [int(np.argmax(lower + upper))], eps1=0.8).channel


def _grr(lower, upper):
    return GRR(THETA.size, 1.0).channel


@pytest.mark.parametrize(("choose", "target_width"), [
    pytest.param(_grr, None, marks=pytest.mark.slow), (_adaptive, None),
    pytest.param(_grr, 0.15, marks=pytest.mark.slow)])  # fmt: skip
def test_each_sequence_covers_at_all_times_at_once(choose, target_width):
    """300 replications of 15 batches: the share of replications in which a category's sequence
    ever excluded its theta is at most 0.1 (one-sided binomial test at level 0.001: it fails a
    valid sequence with probability below 0.001, and one whose share is 0.25 with probability
    above 0.999); bets spread over all times, under channels chosen from the past, and bets
    tuned to a target width."""
    missed = _ever_missed(300, 15, choose, seed=4, target_width=target_width)
    limit = stats.binom.isf(0.001, 300, 0.1)
    assert stats.binom.cdf(limit, 300, 0.25) < 0.001  # the stated power
    assert missed.sum(axis=0).max() <= limit


def test_the_sequences_narrow_like_a_fixed_size_interval():
    """After 10,000 GRR users the widest sequence is within 1x-3x a fixed-size 90% interval of
    the unbiased estimate (its exact variance): wider, the price of covering at all times, but
    of the same order."""
    gen, mech = np.random.default_rng(2), GRR(THETA.size, 1.0)
    sequences = BettingConfidenceSequences(THETA.size, alpha=0.1)
    for _ in range(20):
        sequences.update(mech.channel, _counts(mech.channel, 500, gen))
    lower, upper = sequences.intervals()
    p, q = np.e / (np.e + 3), 1 / (np.e + 3)
    fixed = 2 * 1.645 * np.sqrt((q * (1 - q) + THETA * (1 - p - q) * (p - q)) / (p - q) ** 2 / 1e4)
    assert np.all((upper - lower) / fixed > 1) and np.all((upper - lower) / fixed < 3)


def test_a_singular_channel_bets_nothing_and_bad_input_is_refused():
    sequences = BettingConfidenceSequences(3)
    sequences.update(np.full((3, 3), 1 / 3), np.array([5, 5, 5]))  # reports carry no signal
    assert sequences.users == 0 and np.all(sequences.intervals()[1] == 1.0)
    with pytest.raises(InvalidInputError, match="alpha"):
        BettingConfidenceSequences(3, alpha=1.5)
    with pytest.raises(InvalidInputError, match="3 x 3 channel"):
        sequences.update(np.eye(2), np.array([1, 2]))


def test_a_survey_stops_on_the_confidence_sequences_width():
    """``stop={"cs_width": w}``: the survey stops at a refresh where its sequences, recomputed
    from its reports, are at most ``w`` wide, and says so."""
    x = np.random.default_rng(0).choice(THETA.size, size=40_000, p=THETA)
    survey = AdaptiveSurvey(THETA.size, 2.0, batch_size=200, random_seed=1)
    survey.simulate(x, stop={"cs_width": 0.1})
    stop = survey.stopped
    assert stop is not None and stop["measure"] == "cs_width" and stop["users"] < 40_000
    lower, upper = survey.confidence_sequences(target_width=0.1)
    assert (upper - lower).max() == stop["value"] <= 0.1


def test_a_look_inside_an_epoch_bets_as_the_whole_epoch():
    """Users of one epoch bet alike wherever a look falls in it: with every user of the epoch
    giving the same report, the log capital grows by the same amount per user at two looks."""
    from bayesldp.adaptive.confseq import EpochedSequences

    mech = GRR(3, 1.0)
    looks = EpochedSequences(3)
    codes = np.random.default_rng(2).choice(3, size=400)
    looks.look([mech.channel], codes)  # the epochs that end by user 400, and part of the next
    start, end = looks.start, looks.end
    assert end - start > 20
    same = np.concatenate([codes[:start], np.zeros(end - start, dtype=int)])
    base = looks.complete._log_plus.copy()
    grown = [looks.look([mech.channel], same[: start + m])._log_plus - base for m in (5, 15)]
    np.testing.assert_allclose(grown[1], 3 * grown[0], rtol=1e-12, atol=1e-12)


def test_the_surveys_kept_sequences_are_the_sequences_of_its_reports():
    """The survey keeps its sequences between looks (each epoch added once); at every look
    they are the sequences computed from all its reports at once."""
    from bayesldp.adaptive import sequences_from_reports

    x = np.random.default_rng(3).choice(THETA.size, size=6_000, p=THETA)
    survey = AdaptiveSurvey(THETA.size, 1.0, batch_size=100, random_seed=2)
    for part in np.array_split(x, 4):
        survey.simulate(part)
        kept = survey.confidence_sequences(target_width=0.2)
        history = survey.history
        subsets, of_user = np.unique(history["subset"].values, axis=0, return_inverse=True)
        channels = [RRRR(THETA.size, 1.0, np.flatnonzero(m).tolist(), eps1=survey.eps1).channel
                    for m in subsets]  # fmt: skip
        scratch = sequences_from_reports(THETA.size, channels, of_user.ravel(),
                                         history["report"].values, target_width=0.2)  # fmt: skip
        np.testing.assert_allclose(kept, scratch.intervals(), atol=1e-12)
