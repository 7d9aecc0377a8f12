"""The live survey's web application: its routes, and bad input refused with the right status."""

import http.client
import json
import socket
import threading
import time

import numpy as np
import pytest

from bayesldp.mechanisms.rrrr import RRRR
from bayesldp.serve import LiveSurvey
from bayesldp.serve.app import MAX_BODY, channel_table, create_app, expand_channel

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")


class Client:
    """Requests to a server on the loopback address (``http.client``: what a browser sends)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def json(self, method, path, value=None, headers=None):
        body = None if value is None else json.dumps(value)
        headers = {"content-type": "application/json", **(headers or {})}
        status, text = self.request(method, path, body, headers)
        return status, json.loads(text)


def serve(app):
    """Run ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; returns (server, port)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    return server, thread, sock.getsockname()[1]


OPTIONS = {"k": 4, "epsilon": 1.0, "utility": "tv", "random_seed": 3, "engine": "sgld",
           "n_expected": 100}  # fmt: skip
LABELS = ["red", "green", "blue", "other"]


@pytest.fixture
def served(tmp_path):
    live = LiveSurvey(tmp_path / "d", OPTIONS, batch_size=10, background=False)
    app = create_app(live, question="Favourite colour?", labels=LABELS, dashboard_token="s3cret")
    server, thread, port = serve(app)
    yield live, Client(port)
    server.should_exit = True
    thread.join()
    live.close()


def _assignment(client):
    status, value = client.json("POST", "/api/assignment")
    assert status == 200
    return value


def test_pages_and_an_assignment_with_its_exact_channel(served):
    live, client = served
    status, page = client.request("GET", "/")
    assert status == 200 and "Favourite colour?" in page
    assert "crypto.getRandomValues" in page and "Math.random" not in page
    a = _assignment(client)
    expected = RRRR(4, 1.0, a["subset"], eps1=live.eps1).channel
    assert a["channel"]["subset"] == a["subset"]
    np.testing.assert_array_equal(expand_channel(a["channel"]), expected)
    assert client.request("GET", "/dashboard")[0] == 200


@pytest.mark.parametrize("subset", [[], [0], [3, 57], list(range(99))])
def test_the_channel_travels_compact_and_exact(subset):
    """An assignment carries RRRR's channel as eight numbers, exact at K = 100 for empty, small
    and largest subsets (its K x K matrix would be 10,000 numbers)."""
    mech = RRRR(100, 1.0, subset, eps1=0.6)
    compact = channel_table(mech)
    np.testing.assert_array_equal(expand_channel(compact), mech.channel)
    assert len(json.dumps(compact)) < 700


def test_reports_are_counted_once_and_recorded_in_batches(served):
    live, client = served
    for i in range(25):
        a = _assignment(client)
        status, value = client.json("POST", "/api/report", {"token": a["token"], "report": i % 4})
        assert status == 200 and value == {"accepted": i}
    status, value = client.json("POST", "/api/report", {"token": a["token"], "report": 0})
    assert status == 409 and "once" in value["error"]
    assert live.store.count() == 25 and live.survey.n_users == 20
    _, state = client.json("GET", "/api/posterior", headers={"Authorization": "Bearer s3cret"})
    assert state["stored"] == 25 and state["recorded"] == 20 and state["batches"] == 2
    assert len(state["subset_sizes"]) == 2


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [
        (b'{"token": "x", "report": 1}', {"content-type": "text/plain"}, 415, "content type"),
        (b"{" + b" " * MAX_BODY + b"}", {"content-type": "application/json"}, 413, "at most"),
        (b'{"token": ', {"content-type": "application/json"}, 400, "not valid JSON"),
        (b"[1, 2]", {"content-type": "application/json"}, 400, "object"),
        (b'{"token": "x"}', {"content-type": "application/json"}, 422, "expected"),
        (b'{"token": 3, "report": 1}', {"content-type": "application/json"}, 422, "expected"),
        (b'{"token": "x", "report": 1, "answer": 2}', {"content-type": "application/json"}, 422,
         "expected"),
        (b'{"token": "nope", "report": 1}', {"content-type": "application/json"}, 404,
         "unknown token"),
    ],
)  # fmt: skip
def test_bad_reports_are_refused_and_store_nothing(served, body, headers, status, words):
    live, client = served
    got, text = client.request("POST", "/api/report", body, headers)
    assert got == status
    assert words in json.loads(text)["error"]
    assert live.store.count() == 0


@pytest.mark.parametrize("report", [4, -1, 1.5, "2", None, True])
def test_reports_outside_the_channel_are_refused(served, report):
    live, client = served
    a = _assignment(client)
    status, value = client.json("POST", "/api/report", {"token": a["token"], "report": report})
    assert status == 422 and "report" in value["error"]
    assert live.store.count() == 0


@pytest.mark.parametrize("header", [None, "Bearer wrong", "s3cret", "Bearer s3cretX"])
def test_the_dashboard_api_needs_its_token(served, header):
    _, client = served
    headers = {} if header is None else {"Authorization": header}
    status, text = client.request("GET", "/api/posterior", headers=headers)
    assert status == 401 and "token" in json.loads(text)["error"]


def test_labels_must_match_the_categories(tmp_path):
    from bayesldp.errors import InvalidInputError

    live = LiveSurvey(tmp_path / "d", OPTIONS, background=False)
    with pytest.raises(InvalidInputError, match="4 category labels"):
        create_app(live, question="?", labels=["a"], dashboard_token="t")
    live.close()


def test_the_posterior_downloads_as_inference_data(served, tmp_path):
    """``/api/idata``: behind the token, 409 before any batch, then a netCDF file that
    :func:`bayesldp.load_fit` reads: the posterior of the recorded reports."""
    import bayesldp

    live, client = served
    auth = {"Authorization": "Bearer s3cret"}
    assert client.request("GET", "/api/idata")[0] == 401
    assert client.request("GET", "/api/idata", headers=auth)[0] == 409
    for i in range(10):
        a = _assignment(client)
        client.json("POST", "/api/report", {"token": a["token"], "report": i % 4})
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=120)
    conn.request("GET", "/api/idata", headers=auth)
    response = conn.getresponse()
    assert response.status == 200
    (tmp_path / "p.nc").write_bytes(response.read())
    conn.close()
    idata = bayesldp.load_fit(tmp_path / "p.nc")
    assert idata.posterior["theta"].shape[-1] == 4
    assert int(idata.observed_data["counts"].sum()) == live.survey.n_users == 10


def test_labels_cannot_close_the_pages_script(tmp_path):
    """The page's settings are JSON inside a script: a label holding ``</script>`` stays text."""
    live = LiveSurvey(tmp_path / "d", OPTIONS, background=False)
    app = create_app(live, question="</script><b>x</b>", labels=["a", "b", "c", "</script>"],
                     dashboard_token="t")  # fmt: skip
    server, thread, port = serve(app)
    try:
        status, page = Client(port).request("GET", "/")
    finally:
        server.should_exit = True
        thread.join()
        live.close()
    assert status == 200 and page.count("</script>") == 1  # the page's own closing tag
    assert '"<\\/script>"' in page
