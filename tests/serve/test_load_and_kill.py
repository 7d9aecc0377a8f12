"""``bayesldp serve`` under load on the loopback address, killed with SIGKILL and restarted.

50 simulated respondents at a time ask for assignments and send reports; once 3,000 are
acknowledged the server is killed (``kill -9``) and started again on the same data directory.
A respondent whose request died with the server retries it, with the same token, once the
server is back: a 409 says the report was stored before the kill.  At the end the stored
reports are exactly the acknowledged ones (each token once, with its report), and the survey's
recorded batches are the first stored reports in their order.
"""

import http.client
import json
import signal
import threading
import time

import numpy as np
import pytest

from bayesldp.serve import LiveSurvey, ReportStore
from tests.serve.server import free_port, start_server

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

SPEC = """kind = "survey"
[survey]
name = "load"
n = 100000
k = 5
epsilon = 1.0
batch_size = 500
[population]
kind = "uniform"
[serve]
question = "Which one?"
"""


def _post(port: int, path: str, value=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = None if value is None else json.dumps(value)
        conn.request("POST", path, body=body, headers={"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


class Respondents:
    """``workers`` threads, each answering until ``target`` reports are acknowledged or the
    server goes away; a report whose request failed is kept as ``pending`` for a retry."""

    def __init__(self, target: int, seed: int) -> None:
        self.target, self.lock = target, threading.Lock()
        self.acked: dict[str, int] = {}
        self.pending: list[tuple[str, int]] = []
        self.rng = np.random.default_rng(seed)

    def run(self, port: int, workers: int = 50) -> None:
        threads = [threading.Thread(target=self._answer, args=(port,)) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _answer(self, port: int) -> None:
        while True:
            with self.lock:
                if len(self.acked) >= self.target:
                    return
                report = int(self.rng.integers(0, 5))
            try:
                status, a = _post(port, "/api/assignment")
                assert status == 200, a
            except OSError:
                return
            try:
                status, body = _post(port, "/api/report", {"token": a["token"], "report": report})
            except OSError:  # the server died with the request: retry it later
                with self.lock:
                    self.pending.append((a["token"], report))
                return
            assert status == 200, body
            with self.lock:
                self.acked[a["token"]] = report

    def retry(self, port: int) -> None:
        for token, report in self.pending:
            status, body = _post(port, "/api/report", {"token": token, "report": report})
            assert status in (200, 409), body  # 409: stored before the kill
            self.acked[token] = report
        self.pending = []


def _kill_at(server, respondents: Respondents, acked: int) -> None:
    """SIGKILL the server once ``acked`` reports are acknowledged (mid-stream, whatever the
    machine's speed)."""
    while len(respondents.acked) < acked and server.poll() is None:
        time.sleep(0.001)
    server.send_signal(signal.SIGKILL)
    server.wait()


@pytest.mark.slow
def test_no_acknowledged_report_is_lost_or_counted_twice(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    data, port = tmp_path / "data", free_port()
    respondents = Respondents(target=10_000, seed=1)
    server = start_server(spec, data, port, tmp_path / "server.log")
    killer = threading.Thread(target=_kill_at, args=(server, respondents, 3000))
    killer.start()
    respondents.run(port)  # until the server dies under them
    killer.join()
    assert 3000 <= len(respondents.acked) < 10_000
    server = start_server(spec, data, port, tmp_path / "server.log")
    try:
        respondents.retry(port)
        respondents.run(port)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    store = ReportStore(data / "reports.sqlite", k=5)
    rows = store._db.execute("SELECT token, report FROM reports ORDER BY seq").fetchall()
    store.close()
    assert len(rows) == len(respondents.acked) >= 10_000
    assert dict(rows) == respondents.acked  # each token once, with its own report
    live = LiveSurvey(data, batch_size=500, background=False)  # a restart records the rest
    recorded = live.survey.n_users
    assert recorded == len(rows) // 500 * 500  # every full batch, in the stored order
    np.testing.assert_array_equal(live.survey.history["report"].values,
                                  [report for _, report in rows[:recorded]])  # fmt: skip
    live.close()
