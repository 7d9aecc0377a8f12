"""Warnings where they are read: the ``bayesldp`` command prints each as one line of its own,
without a source path or a line of Python, and ``estimate``'s advice names its options."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import bayesldp
from bayesldp.workflows.cli_session import ESTIMATE_SPELLING

CLI = "import sys; from bayesldp.workflows.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_convergence_warning_is_one_line_in_the_command_s_words(tmp_path):
    """20 draws of 2 chains on a GRR tally: the ConvergenceWarning lines start with
    ``bayesldp: warning:``, carry no ``file.py:LINE`` and no Python keyword advice."""
    mech = bayesldp.GRR(10, 1.0)
    x = np.random.default_rng(0).integers(0, 10, 500)
    path = tmp_path / "r.csv"
    mech.reports_to_frame(mech.perturb(x, rng=1)).to_csv(path, index=False)
    argv = [sys.executable, "-c", CLI, "estimate", str(path), "--mechanism", "GRR", "--k", "10",
            "--epsilon", "1", "--method", "posterior", "--fit-method", "hmc", "--draws", "20",
            "--tune", "20", "--chains", "2", "--quiet"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    warned = [line for line in lines if line.startswith("bayesldp: warning: ")]
    assert warned and len(warned) == len(lines), done.stderr
    assert any("--draws" in line for line in warned), warned
    for line in warned:
        assert ".py:" not in line and "Warning:" not in line, line
        assert not any(python in line for python in ESTIMATE_SPELLING if python != "prior="), line


def test_target_accept_reaches_the_sampler(tmp_path, capsys):
    """``--target-accept`` is the option the divergence advice names: it reaches fit."""
    from bayesldp.workflows.cli import main

    mech = bayesldp.GRR(3, 1.0)
    path = tmp_path / "r.csv"
    mech.reports_to_frame(mech.perturb(np.arange(60) % 3, rng=1)).to_csv(path, index=False)
    base = ["estimate", str(path), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
            "--method", "posterior", "--fit-method", "hmc", "--quiet"]  # fmt: skip
    assert main([*base, "--target-accept", "1.5"]) == 2
    assert "target_accept" in capsys.readouterr().err
