"""The live survey's web application (Starlette): the respondent page, its API and the dashboard.

Routes:

* ``GET /``: the respondent page.  It asks for an assignment, shows the question and, on
  submit, draws the report from the assigned channel's row of the chosen answer *in the
  browser* (``crypto.getRandomValues``); only the report and the token are sent.
* ``POST /api/assignment``: a single-use token, the RRRR subset and its exact channel in
  :func:`channel_table`'s compact form (eight numbers, not ``K x K``), from
  :meth:`LiveSurvey.assign`.
* ``POST /api/report``: ``{"token": ..., "report": ...}`` (JSON, at most ``MAX_BODY`` bytes);
  200 with the report's sequence number, or a 4xx with ``{"error": message}`` and nothing
  stored (see :class:`~bayesldp.serve.store.ReportStore`).
* ``GET /dashboard``: the dashboard page (it reads its token from the address's fragment,
  ``#token=...``, which browsers do not send, and passes it as a bearer token).
* ``GET /api/posterior``: the survey's state as JSON (:meth:`LiveSurvey.snapshot`), behind
  ``Authorization: Bearer <dashboard token>``.
* ``GET /api/idata``: ``bayesldp.fit`` of the recorded reports as an ArviZ InferenceData netCDF
  file (:func:`bayesldp.save_fit`), behind the same token; it fits on request (seconds), off the
  respondents' path.

Needs the ``serve`` extra (``pip install 'bayesldp[serve]'``: Starlette and uvicorn).
"""

from __future__ import annotations

import functools
import hmac
import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp._optional import require
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.rrrr import RRRR
from bayesldp.serve.live import LiveSurvey
from bayesldp.serve.store import ReportRefused

#: the largest request body taken (bytes); a report is a token and a small integer
MAX_BODY = 1024


def _error(status: int, message: str):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request) -> tuple[dict | None, Any]:
    """The request's JSON object, or ``(None, error response)``: 415 for another content type,
    413 for a body over :data:`MAX_BODY`, 400 for malformed JSON or not an object."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return None, _error(415, f"content type: application/json expected, got {kind or 'none'}")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        return None, _error(413, f"body: at most {MAX_BODY} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None, _error(413, f"body: at most {MAX_BODY} bytes")
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, _error(400, "body: not valid JSON")
    if not isinstance(value, dict):
        return None, _error(400, "body: a JSON object expected")
    return value, None


class _Committer:
    """Group commit: the reports that arrive while a transaction is on its way to disk wait and
    go to disk together in the next one (one ``fsync`` for many), each answered once its own
    transaction is committed."""

    def __init__(self, live: LiveSurvey) -> None:
        self.live = live
        self.pending: list[tuple[str, Any, Any]] = []
        self.task = None

    async def submit(self, token: str, report: Any) -> int | ReportRefused:
        import asyncio

        done = asyncio.get_running_loop().create_future()
        self.pending.append((token, report, done))
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        from starlette.concurrency import run_in_threadpool

        while self.pending:
            batch, self.pending = self.pending, []
            try:
                outcomes = await run_in_threadpool(self.live.submit_many,
                                                   [(t, r) for t, r, _ in batch])  # fmt: skip
            except Exception as exc:  # the store failed: every waiting request learns it
                outcomes = [exc] * len(batch)
            for (_, _, done), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, Exception) and not isinstance(outcome, ReportRefused):
                    done.set_exception(outcome)
                else:
                    done.set_result(outcome)


def channel_table(mech: RRRR) -> dict[str, Any]:
    """RRRR's exact channel as the respondent's page takes it: ``{"k", "subset", "table"}``.

    ``P(y | x)`` depends only on whether ``x`` and ``y`` are in the subset ``S`` and whether
    ``y = x`` (:func:`~bayesldp.mechanisms.rrrr.rrrr_channel`), so the channel is the
    ``2 x 2 x 2`` table ``table[x in S][y in S][y == x]`` of its own entries (0 where no
    ``(x, y)`` has that pattern): an assignment is a few hundred bytes at any ``K``, where the
    ``K x K`` matrix is ``K^2`` numbers (10,000 at ``K = 100``).  The table is checked to give
    the channel back exactly (:func:`expand_channel`).

    Examples
    --------
    >>> table = channel_table(RRRR(4, 1.0, [0, 3]))
    >>> np.array_equal(expand_channel(table), RRRR(4, 1.0, [0, 3]).channel)
    True
    """
    k, subset = mech.k, [int(v) for v in mech.subset]
    channel, member = np.asarray(mech.channel), np.isin(np.arange(k), subset)
    table = np.zeros((2, 2, 2))
    x_in, y_in = np.meshgrid(member, member, indexing="ij")
    same = np.eye(k, dtype=bool)
    for a, b, c in np.ndindex(2, 2, 2):
        cells = channel[(x_in == a) & (y_in == b) & (same == c)]
        if cells.size:
            table[a, b, c] = cells[0]
    out = {"k": k, "subset": subset, "table": table.tolist()}
    if not np.array_equal(expand_channel(out), channel):
        raise InvalidInputError(f"mechanism: {mech!r}'s channel is not symmetric within S and "
                                "outside it; it has no compact table")  # fmt: skip
    return out


def expand_channel(compact: dict[str, Any]) -> np.ndarray:
    """The ``K x K`` channel of :func:`channel_table`'s compact form (what the page computes
    for one row: ``table[x in S][y in S][y == x]``)."""
    k, table = compact["k"], np.asarray(compact["table"])
    member = np.isin(np.arange(k), compact["subset"]).astype(int)
    return table[member[:, None], member[None, :], np.eye(k, dtype=int)]


def _page(name: str, settings: dict[str, Any]) -> str:
    text = resources.files("bayesldp.serve").joinpath("static", name).read_text("utf-8")
    # "</" escaped: a label holding "</script>" stays text inside the page's script
    return text.replace("/*SETTINGS*/null", json.dumps(settings).replace("</", "<\\/"))


def create_app(live: LiveSurvey, *, question: str, labels: list[str], dashboard_token: str):
    """The Starlette application serving ``live`` (see the module docstring for its routes)."""
    require("starlette", "the live survey's web application")
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    if len(labels) != live.k:
        raise InvalidInputError(f"labels: {live.k} category labels, got {len(labels)}")
    eps, eps1 = live.epsilon, live.eps1
    settings = {"question": question, "labels": labels, "epsilon": eps}

    committer = _Committer(live)

    async def respondent(request):
        return HTMLResponse(_page("respondent.html", settings))

    @functools.lru_cache(maxsize=1024)
    def channel(subset: tuple[int, ...]) -> dict[str, Any]:
        """The assigned RRRR's exact channel, compact (:func:`channel_table`)."""
        return channel_table(RRRR(live.k, eps, list(subset), eps1=eps1))

    async def assignment(request):
        try:
            a = await run_in_threadpool(live.assign)
        except ReportRefused as refused:
            return _error(refused.status, str(refused))
        return JSONResponse({"token": a.token, "subset": list(a.subset), "expires": a.expires,
                             "channel": channel(a.subset)})  # fmt: skip

    async def report(request):
        body, failure = await _json_body(request)
        if failure is not None:
            return failure
        if set(body) != {"token", "report"} or not isinstance(body["token"], str):
            return _error(422, 'body: {"token": string, "report": integer} expected')
        outcome = await committer.submit(body["token"], body["report"])
        if isinstance(outcome, ReportRefused):
            return _error(outcome.status, str(outcome))
        return JSONResponse({"accepted": outcome})

    def authorised(request) -> bool:
        given = request.headers.get("authorization", "")
        return given.startswith("Bearer ") and hmac.compare_digest(
            given.removeprefix("Bearer ").encode(), dashboard_token.encode()
        )

    async def dashboard(request):
        return HTMLResponse(_page("dashboard.html", {**settings, "k": live.k}))

    async def posterior(request):
        if not authorised(request):
            return _error(401, "dashboard: missing or wrong token (Authorization: Bearer ...)")
        return JSONResponse(live.snapshot())

    def fitted_file() -> bytes:
        from bayesldp.bayes.fit import fit
        from bayesldp.bayes.io import save_fit

        survey = live.survey
        if survey.n_users == 0:
            raise ReportRefused(409, "idata: no batch recorded yet; nothing to fit")
        with tempfile.TemporaryDirectory() as tmp:
            path = save_fit(fit(survey.tally(), progressbar=False), Path(tmp) / "fit.nc")
            return path.read_bytes()

    async def idata(request):
        if not authorised(request):
            return _error(401, "dashboard: missing or wrong token (Authorization: Bearer ...)")
        try:
            content = await run_in_threadpool(fitted_file)
        except ReportRefused as refused:
            return _error(refused.status, str(refused))
        attachment = {"content-disposition": 'attachment; filename="posterior.nc"'}
        return Response(content, media_type="application/x-netcdf", headers=attachment)

    routes = [
        Route("/", respondent),
        Route("/api/assignment", assignment, methods=["POST"]),
        Route("/api/report", report, methods=["POST"]),
        Route("/dashboard", dashboard),
        Route("/api/posterior", posterior),
        Route("/api/idata", idata),
    ]
    return Starlette(routes=routes)
