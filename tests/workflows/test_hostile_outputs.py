"""Hostile outputs: where results land, whether they land together, and what a rerun finds.

Each case states its expected outcome: a one-line error of the package's own type (exit code 2
from the CLI), or results that land together (all of a run's files, or none of them).

* names: a spec's ``name`` is the default output directory ``out/<name>``; an absolute name, one
  holding a path separator, ``.`` / ``..`` or nothing is refused at spec load, for every kind;
* stopped surveys: a resumed survey whose stop target was met collects no more users and says
  so; a report never says "not met" of a survey that did not reach its users;
* sizes and permissions: huge sizes are refused before any allocation, naming the limit;
  unreadable inputs and read-only outputs are one line, not a traceback;
* crash safety: a survey's spec is checked before anything is written; a kill during a new
  store's creation or during ``run``'s publishing step leaves a state the next command
  recovers; a target that cannot be replaced fails before any file is moved.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.cli import main
from bayesldp.workflows.spec import SpecError, load_spec
from tests.workflows.test_cli import SMALL_SPEC
from tests.workflows.test_hostile_inputs import one_line_error, survey_spec

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.toml"))


def _renamed(text: str, name: str) -> str:
    """``text`` with its first top-level ``name = "..."`` (the main table's) set to ``name``."""
    quoted = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return re.sub(r'(?m)^name = "[^"]*"', lambda _: f"name = {quoted}", text, count=1)


# ------------------------------------------------------------------ names are one component
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", ["/abs/dir", "../../..", "..", "a/b", "a\\b", "", "  ", "x\ty"])
def test_a_name_that_is_not_one_plain_component_is_refused_at_load(tmp_path, model, name):
    spec = tmp_path / model.name
    spec.write_text(_renamed(model.read_text(encoding="utf-8"), name), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    message = str(info.value)
    assert re.search(r"\[(study|survey|grid)\]\.name: ", message), message
    assert "out/<name>" in message and "refused, not renamed" in message, message
    assert "\n" not in message


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_a_plain_name_still_loads(tmp_path, model):
    spec = tmp_path / model.name
    spec.write_text(_renamed(model.read_text(encoding="utf-8"), "my run.v2"), encoding="utf-8")
    load_spec(spec)


def test_run_with_an_absolute_name_writes_nothing_there(tmp_path, capsys, monkeypatch):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("mine")
    spec = tmp_path / "s.toml"
    spec.write_text(SMALL_SPEC.replace('name = "small"', f'name = "{victim}"'))
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(spec), "--quiet", "--no-figures"])
    one_line_error(capsys, code, "[study].name", str(victim), "out/<name>")
    assert (victim / "report.md").read_text() == "mine"
    assert sorted(p.name for p in victim.iterdir()) == ["report.md"]
    assert not (tmp_path / "out").exists()


def test_survey_name_escaping_out_is_refused(tmp_path, capsys, monkeypatch):
    spec = survey_spec(tmp_path, replace=[('name = "s"', 'name = "../../.."')])
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(spec), "--quiet"])
    one_line_error(capsys, code, "[survey].name", "'../../..'")
    assert not (tmp_path / "out").exists()
