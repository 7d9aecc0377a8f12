"""The respondent page in a real browser (Chromium, driven by Playwright): its JavaScript draws
reports by the exact channel, and its requests carry the report, never the answer."""

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from bayesldp.mechanisms.rrrr import RRRR
from bayesldp.serve import LiveSurvey
from bayesldp.serve.app import channel_table, create_app
from tests.serve.test_app import OPTIONS, serve
from tests.stats_helpers import assert_chi_square_fit_with_power

pytest.importorskip("starlette")
sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)",
                allow_module_level=True)  # fmt: skip
#: flags for a headless Chromium on a closed network (no background connections)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]  # fmt: skip
#: where the screenshots go: the docs' images with BAYESLDP_SCREENSHOTS=1 (how they are made),
#: else a scratch directory, so that a test run leaves the checkout as it was
DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "_static" / "serve"


@pytest.fixture(scope="module")
def page_at(tmp_path_factory):
    options = {key: OPTIONS[key] for key in ("k", "epsilon", "utility", "random_seed")}
    live = LiveSurvey(tmp_path_factory.mktemp("d"), options, batch_size=100)  # posterior engine
    app = create_app(live, question="Favourite colour?", labels=["red", "green", "blue", "other"],
                     dashboard_token="s3cret")  # fmt: skip
    server, thread, port = serve(app)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser, f"http://127.0.0.1:{port}", live
        browser.close()
    server.should_exit = True
    thread.join()
    live.close()


def _respond(live, n):
    """``n`` respondents answering from a skewed population through their assigned channels."""
    rng = np.random.default_rng(7)
    for _ in range(n):
        a = live.assign()
        x = rng.choice(4, p=[0.55, 0.3, 0.1, 0.05])
        row = RRRR(4, 1.0, list(a.subset), eps1=live.eps1).channel[x]
        live.submit(a.token, int(rng.choice(4, p=row)))


@pytest.mark.parametrize(("subset", "answer"), [((), 2), ((0, 3), 0), ((0, 3), 1)])
def test_the_pages_draws_follow_the_channel(page_at, subset, answer):
    """20,000 reports drawn by the page's own ``randomise`` for one answer, against the channel
    row (chi-square at level 1e-3).  Power: against the same subset's RRRR at a budget 20%
    larger (epsilon and eps1 both times 1.2), above 0.999 (the helper checks it from the
    non-central chi-square)."""
    browser, url, live = page_at
    page = browser.new_page()
    page.goto(url + "/")
    page.wait_for_function("() => assignment !== null")
    eps1 = live.eps1
    compact = channel_table(RRRR(4, 1.0, list(subset), eps1=eps1))
    channel = RRRR(4, 1.0, list(subset), eps1=eps1).channel
    rows = page.evaluate("([c]) => Array.from({length: c.k}, (_, x) => channelRow(c, x))",
                         [compact])  # fmt: skip
    np.testing.assert_array_equal(np.array(rows), channel)  # the page's channel is exact
    draws = page.evaluate(
        "([channel, x, n]) => Array.from({length: n}, () => randomise({channel}, x))",
        [compact, answer, 20_000],
    )
    page.close()
    observed = np.bincount(draws, minlength=4)
    wrong = RRRR(4, 1.2, list(subset), eps1=1.2 * eps1).channel[answer]
    assert_chi_square_fit_with_power(observed, channel[answer], wrong)


def test_a_respondent_sends_the_report_only(page_at, tmp_path):
    """Answer through the page as a person would; every request the browser makes is recorded:
    the report's body holds exactly a token and a category, no answer or label, and the
    survey stores it.  Screenshots of the page and the dashboard: docs/_static/serve with
    ``BAYESLDP_SCREENSHOTS=1``."""
    browser, url, live = page_at
    page = browser.new_page()
    bodies = []
    page.on("request", lambda request: bodies.append((request.url, request.post_data)))
    page.goto(url + "/")
    page.wait_for_function("() => assignment !== null")
    before = live.store.count()
    page.get_by_label("blue").check()
    shots = DOCS_SHOTS if os.environ.get("BAYESLDP_SCREENSHOTS") == "1" else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "respondent.png"))
    page.get_by_role("button", name="Send").click()
    page.wait_for_function("() => document.getElementById('status').textContent.length > 0")
    assert "Thank you" in page.text_content("#status")
    assert live.store.count() == before + 1
    reports = [json.loads(body) for u, body in bodies if u.endswith("/api/report")]
    assert len(reports) == 1 and set(reports[0]) == {"token", "report"}
    assert all("blue" not in (body or "") for _, body in bodies)
    page.close()
    _respond(live, 600)  # respondents answering in Python, for the dashboard to show
    deadline = time.monotonic() + 120
    while live.snapshot()["recorded"] < 600 and time.monotonic() < deadline:
        time.sleep(0.1)
    dash = browser.new_page(viewport={"width": 1000, "height": 900})
    dash.goto(url + "/dashboard#token=s3cret")
    dash.wait_for_function("() => document.querySelectorAll('#bands circle').length === 4")
    dash.screenshot(path=str(shots / "dashboard.png"), full_page=True)
    assert "users stored" in dash.text_content("#facts")
    dash.close()
