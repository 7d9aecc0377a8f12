"""benchmarks/registry.py covers every benchmark script and results file, and its commands parse.

Each entry's full and quick commands go through the script's own argparse parser without running
it: ``ArgumentParser.parse_args`` is patched to stop right after parsing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import subprocess
import sys

import pytest

from benchmarks.__main__ import header_command
from benchmarks.registry import (
    BENCHMARKS,
    HELPERS,
    INVESTIGATIONS,
    REGISTRY,
    RESULTS_DIRS,
    ROOT,
    resolve,
)

ENTRIES = list(REGISTRY.values())


def test_every_script_is_registered_or_a_helper():
    found = [*BENCHMARKS.glob("*.py"), *INVESTIGATIONS.glob("*.py")]
    scripts = {p.relative_to(BENCHMARKS).as_posix() for p in found} - set(HELPERS)
    registered = {(b.directory / b.script).relative_to(BENCHMARKS).as_posix()
                  for b in ENTRIES if not b.is_module}  # fmt: skip
    assert scripts - registered == set(), "benchmarks/ scripts missing from the registry"
    assert registered - scripts == set(), "registry entries whose script does not exist"
    assert all((BENCHMARKS / h).exists() for h in HELPERS)


def test_the_suite_and_the_investigations_apart():
    """Investigations live in benchmarks/investigations/, results beside them; the suite not."""
    for b in ENTRIES:
        if b.is_module:
            continue
        assert (b.directory / b.script).is_file(), b.name
        assert b.directory == (INVESTIGATIONS if b.kind == "investigation" else BENCHMARKS)
        for args in (b.full, b.quick or ()):
            for arg in args:
                if "results/" in arg:
                    assert arg.startswith(b.results_dir.relative_to(ROOT).as_posix()), (b, arg)


def test_names_kinds_and_results_files():
    assert len(REGISTRY) == len(ENTRIES), "duplicate names"
    for b in ENTRIES:
        assert b.kind in ("suite", "investigation"), b.name
        assert b.measures and b.anchor, b.name
        for name in b.results:
            assert (b.results_dir / name).is_file(), f"{b.name}: {b.results_dir}/{name} missing"
        for name in b.uncommitted:
            assert not (b.results_dir / name).exists(), f"{b.name}: {name} is committed now"
        if b.quick is None:
            assert b.quick_note, f"{b.name}: say why there is no quick command"
        else:
            quick = " ".join(b.quick)
            assert "results/" not in quick, f"{b.name}: a quick run writes results"
    owned = [b.results_dir / name for b in ENTRIES for name in b.results]
    assert len(owned) == len(set(owned)), "a results file owned by two entries"
    files = {p for d in RESULTS_DIRS.values() for p in d.iterdir() if p.is_file()}
    assert files - set(owned) == set(), "results files that no registry entry writes"


def test_committed_headers_name_the_full_command():
    """A results file's header names its entry's full command, or the entry says how not; an
    investigation's header written before the move may name its script at the old path."""
    for b in ENTRIES:
        for name in b.results:
            path = b.results_dir / name
            if path.suffix != ".md" or b.header_note:
                continue
            shown = {b.shown(), b.shown_before_the_move()}
            assert header_command(path) in shown, f"{name}: header against the registry"


class _Parsed(Exception):
    pass


def _parse_with_script(b, args: list[str], monkeypatch) -> argparse.Namespace:
    original = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    if b.parser:
        module_name, func_name = b.parser.split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        if func_name == "build_parser":
            return func().parse_args(args)
    else:
        spec = importlib.util.spec_from_file_location(
            f"_bench_{b.script[:-3]}", b.directory / b.script
        )
        module = importlib.util.module_from_spec(spec)
        monkeypatch.syspath_prepend(str(BENCHMARKS))
        monkeypatch.syspath_prepend(str(b.directory))
        monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look it up
        spec.loader.exec_module(module)
        func = module.main
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    monkeypatch.setattr(sys, "argv", [b.script, *args])
    with pytest.raises(_Parsed) as parsed:
        func(args) if inspect.signature(func).parameters else func()
    return parsed.value.args[0]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_commands_parse_with_the_scripts_argparse(name, monkeypatch, tmp_path):
    b = REGISTRY[name]
    monkeypatch.setenv("BAYESLDP_LDP_EM_MR", str(tmp_path / "mirror"))
    monkeypatch.setenv("BAYESLDP_ADOBEST_CODE", str(tmp_path / "code"))
    commands = {"full": b.full} | ({} if b.quick is None else {"quick": b.quick})
    for which, args in commands.items():
        argv = resolve(args, [], str(tmp_path))
        try:
            _parse_with_script(b, argv, monkeypatch)
        except SystemExit as exc:  # argparse's error exit
            pytest.fail(f"{name} {which}: {argv} does not parse ({exc})")


def test_list_runs():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip
    for b in ENTRIES:
        assert b.name in out
    tables = out.split("Investigations:")
    assert len(tables) == 2, "list shows the suite, then the investigations"
    first_words = [{line.split()[0] for line in t.splitlines() if line.strip()} for t in tables]
    for b in ENTRIES:
        assert b.name in first_words[b.kind == "investigation"], b.name


def test_every_mutant_snippet_occurs_once_in_its_file():
    """A refactor that moves or edits a mutated line must move the mutant with it
    (benchmarks/mutation_tests.py refuses a snippet that is not found exactly once)."""
    from benchmarks.mutation_tests import MUTANTS

    drifted = []
    for mutant in MUTANTS:
        if not mutant.file:
            continue
        count = (ROOT / mutant.file).read_text().count(mutant.snippet)
        if count != 1:
            drifted.append(f"{mutant.id}: {count} times in {mutant.file}")
    assert not drifted, drifted
