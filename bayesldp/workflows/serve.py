"""``bayesldp serve SPEC.toml``: the survey of a spec, live, for real respondents.

The live survey's modules are imported by the command itself, not when the parser is built, so
that every other command starts as fast as before."""

from __future__ import annotations

import argparse
import gc
import secrets
from pathlib import Path


def dashboard_token(directory: Path) -> str:
    """The dashboard's token, made once per data directory (kept across restarts, readable by
    the owner only)."""
    path = directory / "dashboard.token"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(24))
    return path.read_text().strip()


def cmd_serve(args: argparse.Namespace) -> int:
    """Start (or resume) the survey of ``args.spec`` and serve it until interrupted."""
    from bayesldp._optional import require
    from bayesldp.serve.app import create_app
    from bayesldp.serve.live import LiveSurvey
    from bayesldp.workflows.spec import load_spec

    uvicorn = require("uvicorn", "bayesldp serve")
    from bayesldp.workflows.spec.survey import survey_settings

    spec = load_spec(args.spec, kind="survey")
    cfg, serve = spec["survey"], spec["serve"]
    directory = Path(args.data_dir or serve["data_dir"])
    options = None
    if not (directory / "survey.npz").exists():
        options = {"k": cfg["k"], "epsilon": float(cfg["epsilon"]),
                   **survey_settings(cfg, cfg["utility"])}  # fmt: skip
    from bayesldp.workflows.survey import stop_target

    live = LiveSurvey(directory, options, batch_size=cfg["batch_size"], ttl=serve["ttl"],
                      stop=stop_target(cfg))  # fmt: skip
    labels = serve["labels"] or [str(j) for j in range(cfg["k"])]
    token = dashboard_token(directory)
    app = create_app(live, question=serve["question"] or cfg["name"], labels=labels,
                     dashboard_token=token)  # fmt: skip
    host, port = args.host or serve["host"], args.port or serve["port"]
    print(f"bayesldp serve: respondents: http://{host}:{port}/", flush=True)
    print(f"bayesldp serve: dashboard:   http://{host}:{port}/dashboard#token={token}", flush=True)
    print(f"bayesldp serve: data in {directory} ({live.snapshot()['recorded']} reports recorded, "
          f"{live.store.count()} stored)", flush=True)  # fmt: skip
    # the server's heap holds the whole scientific stack (millions of objects); a full garbage
    # collection over it stalls every request in flight, every few seconds under load.
    # Frozen, those objects are out of the collector's scans; the requests' own garbage is not.
    gc.collect()
    gc.freeze()
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        live.close()
    return 0


def add_parser(sub) -> None:
    """The ``serve`` subcommand."""
    srv = sub.add_parser("serve", help="run a survey spec live for real respondents "
                         "(needs the 'serve' extra)")  # fmt: skip
    srv.add_argument("spec", help="survey spec (TOML) with a [serve] table")
    srv.add_argument("--host", help="address to listen on (default: [serve].host)")
    srv.add_argument("--port", type=int, help="port (default: [serve].port)")
    srv.add_argument("--data-dir", help="state and reports (default: [serve].data_dir)")
    srv.set_defaults(func=cmd_serve)
