"""The live survey's store: exactly once, refusals that store nothing, durable across a kill."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.errors import InvalidInputError
from bayesldp.serve import LiveSurvey, ReportRefused, ReportStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refusals_carry_their_status_and_store_nothing(tmp_path):
    clock = Clock()
    store = ReportStore(tmp_path / "s.sqlite", k=4, clock=clock)
    a, b = store.issue([1, 3], ttl=10), store.issue([], ttl=10)
    nonce, expires, subset, signature = a.token.split(".")
    forged = [f"{nonce}.{expires}.1.{signature}", f"{nonce}.{int(expires) + 1}.{subset}."
              f"{signature}", f"{nonce}.{expires}.{subset}.{'0' * len(signature)}"]  # fmt: skip
    cases = [*((token, 1, 404) for token in forged), ("nope", 1, 404), (a.token, 4, 422),
             (a.token, -1, 422), (a.token, "2", 422), (a.token, True, 422),
             (a.token, 2.0, 422)]  # fmt: skip
    for token, report, status in cases:
        with pytest.raises(ReportRefused) as err:
            store.accept(token, report)
        assert err.value.status == status, (token, report)
    assert store.count() == 0
    assert store.accept(a.token, 3) == 0  # the refusals took no sequence number
    with pytest.raises(ReportRefused) as err:  # a replay: refused, the first report kept
        store.accept(a.token, 0)
    assert err.value.status == 409
    clock.now += 11
    with pytest.raises(ReportRefused) as err:
        store.accept(b.token, 0)
    assert err.value.status == 410
    reports, masks = store.batch(0, 1)
    assert reports.tolist() == [3] and masks.tolist() == [[False, True, False, True]]
    store.close()


def test_bad_assignments_and_another_k_are_refused(tmp_path):
    store = ReportStore(tmp_path / "s.sqlite", k=3)
    for subset in ([3], [0, 0], [-1]):
        with pytest.raises(InvalidInputError, match="subset"):
            store.issue(subset, ttl=5)
    with pytest.raises(InvalidInputError, match="ttl"):
        store.issue([0], ttl=0)
    store.close()
    with pytest.raises(InvalidInputError, match="k = 3"):
        ReportStore(tmp_path / "s.sqlite", k=4)


def test_acknowledged_reports_survive_a_kill(tmp_path):
    """A child process accepts reports and prints each sequence number once ``accept`` has
    returned (the acknowledgement); it is killed with SIGKILL mid-stream.  Every acknowledged
    report is in the reopened store, under its own token, and none twice."""
    path = tmp_path / "s.sqlite"
    child = textwrap.dedent(f"""
        import sys
        from bayesldp.serve import ReportStore
        store = ReportStore({str(path)!r}, k=5)
        for i in range(100000):
            a = store.issue([i % 5], ttl=60)
            seq = store.accept(a.token, i % 5)
            print(seq, a.token, i % 5, flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE,
                          text=True) as proc:  # fmt: skip
        acked = [proc.stdout.readline().split() for _ in range(300)]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    store = ReportStore(path, k=5)
    assert store.count() >= len(acked)
    for seq, token, report in acked:
        row = store._db.execute("SELECT seq, report FROM reports WHERE token = ?",
                                (token,)).fetchall()  # fmt: skip
        assert row == [(int(seq), int(report))]
    n = store.count()
    assert store._db.execute("SELECT COUNT(DISTINCT token) FROM reports").fetchone()[0] == n
    assert store._db.execute("SELECT MAX(seq) FROM reports").fetchone()[0] == n - 1
    store.close()


OPTIONS = {
    "k": 4,
    "epsilon": 1.0,
    "utility": "tv",
    "random_seed": 3,
    "engine": "sgld",
    "n_expected": 150,
}


def _answer(live, rng, n):
    for _ in range(n):
        a = live.assign()
        live.submit(a.token, int(rng.integers(0, 4)))


def test_live_survey_records_batches_and_resumes_with_the_same_state(tmp_path):
    """Reports recorded in batches of 50 in arrival order with their own subsets; a restart
    records the stored remainder; the state equals a survey fed the same batches directly."""
    rng = np.random.default_rng(0)
    live = LiveSurvey(tmp_path / "d", OPTIONS, batch_size=50, background=False)
    _answer(live, rng, 120)
    assert live.survey.n_users == 100 and live.store.count() == 120
    live.close()
    again = LiveSurvey(tmp_path / "d", batch_size=50, background=False)
    assert again.survey.n_users == 100
    _answer(again, rng, 30)
    assert again.survey.n_users == 150
    direct = AdaptiveSurvey(**OPTIONS)
    for start in range(0, 150, 50):
        reports, masks = again.store.batch(start, start + 50)
        direct.record(reports, masks)
    np.testing.assert_array_equal(direct.theta, again.survey.theta)
    np.testing.assert_array_equal(direct.tally().counts, again.survey.tally().counts)
    again.close()


def test_a_new_survey_needs_options_and_an_old_one_none(tmp_path):
    with pytest.raises(InvalidInputError, match="survey_options"):
        LiveSurvey(tmp_path / "d", background=False)
    LiveSurvey(tmp_path / "d", OPTIONS, background=False).close()
    with pytest.raises(InvalidInputError, match="holds a survey"):
        LiveSurvey(tmp_path / "d", OPTIONS, background=False)


def test_the_background_process_records_off_the_request_path(tmp_path):
    """With ``background=True`` submit only stores; the recorder process records the full
    batches (polled for up to 120 s: it starts a fresh interpreter) and publishes the state the
    server reads; close() ends it; a restart in the foreground finds the same survey."""
    import time

    live = LiveSurvey(tmp_path / "d", OPTIONS, batch_size=25, background=True)
    assert live._process.pid != os.getpid()
    _answer(live, np.random.default_rng(1), 60)
    deadline = time.monotonic() + 120
    while live.snapshot()["recorded"] < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.snapshot()["recorded"] == 50 and live.error is None
    assert live.survey.n_users == 50  # the checkpoint's copy
    live.close()
    assert not live._process.is_alive() and live._process.exitcode == 0
    again = LiveSurvey(tmp_path / "d", batch_size=25, background=False)
    assert again.survey.n_users == 50 and again.subset == live.subset
    again.close()


def test_a_met_stopping_target_closes_the_survey_across_a_restart(tmp_path):
    """A target every posterior meets (the largest 90% interval at most 1) stops the survey
    after its first batch: assignments are refused with 410, the snapshot says where, and a
    restart keeps the stop."""
    options = {"k": 3, "epsilon": 1.0, "random_seed": 0}
    live = LiveSurvey(tmp_path / "d", options, batch_size=5, background=False,
                      stop={"width": 1.0})  # fmt: skip
    for report in [0, 1, 2, 0, 0]:
        live.submit(live.assign().token, report)
    assert live.stopped is not None and live.stopped["users"] == 5
    with pytest.raises(ReportRefused) as err:
        live.assign()
    assert err.value.status == 410
    assert live.snapshot()["stopped"]["value"] <= 1.0
    live.close()
    again = LiveSurvey(tmp_path / "d", background=False, stop={"width": 1.0})
    assert again.stopped == live.stopped
    again.close()
    with pytest.raises(InvalidInputError, match="engine"):
        LiveSurvey(tmp_path / "e", OPTIONS, stop={"width": 0.1}, background=False)
