"""Durable surveys: atomic checkpoints, resume bit-identical to an uninterrupted run (also after
SIGKILL at random points), clear errors for corrupt or foreign state files."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from bayesldp.adaptive import AdaptiveSurvey, CheckpointError
from bayesldp.adaptive.checkpoint import _digest

ROOT = Path(__file__).resolve().parents[2]
THETA = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
CONFIG = {"utility": "tv", "batch_size": 50, "random_seed": 7, "n_expected": 3000}


def _users(n=3000, seed=123):
    return np.random.default_rng(seed).choice(6, size=n, p=THETA)


def _reference(engine="posterior"):
    return AdaptiveSurvey(6, 1.0, engine=engine, **CONFIG).simulate(_users())


def _assert_same(a, b):
    xr.testing.assert_identical(a.history, b.history)
    assert np.array_equal(a._phi, b._phi)
    if a.engine == "sgld":  # the paper's final SGLD run
        pa, pb = (s.posterior(draws=200, chains=2, engine="sgld") for s in (a, b))
    else:  # bayesldp.fit of the tally, short (its draws, not its convergence, are compared)
        short = {"draws": 50, "chains": 1, "tune": 50, "compute_convergence_checks": False}
        pa, pb = a.posterior(**short), b.posterior(**short)
    assert np.array_equal(pa.posterior["theta"].values, pb.posterior["theta"].values)


@pytest.mark.parametrize("engine", ["posterior", "sgld"])
def test_save_resume_continue_is_bit_identical(tmp_path, engine):
    path = tmp_path / "survey.npz"
    x = _users()
    first = AdaptiveSurvey(6, 1.0, checkpoint=path, engine=engine, **CONFIG)
    assert path.is_file()  # the initial state is written at once
    first.simulate(x[:1150])  # 23 batches
    resumed = AdaptiveSurvey.resume(path)
    assert resumed.n_users == 1150 and resumed.n_batches == 23
    xr.testing.assert_identical(resumed.history, first.history)
    resumed.simulate(x[1150:])
    _assert_same(resumed, _reference(engine))
    # the checkpoint kept up with the resumed survey
    again = AdaptiveSurvey.resume(path, checkpoint=False)
    assert again.n_users == 3000 and again.checkpoint is None
    xr.testing.assert_identical(again.history, resumed.history)


def test_record_mode_resume(tmp_path):
    path = tmp_path / "live.npz"
    x = _users(600, 5)
    gen = np.random.default_rng(1)
    reports = []
    live = AdaptiveSurvey(6, 0.5, utility="entropy", n_expected=600, random_seed=3, checkpoint=path)
    for i in range(6):
        if i == 3:  # the server restarts
            live = AdaptiveSurvey.resume(path)
        mech = live.next_subset()
        batch = mech.perturb(x[i * 100 : (i + 1) * 100], rng=gen)
        reports.append((batch, mech))
        assert live.record(batch, mech, batch=i) is True
    # a retry of batch 2 after the restart is recognised and not recorded twice
    batch, mech = reports[2]
    assert live.record(batch, mech, batch=2) is False
    assert live.n_users == 600
    with pytest.raises(ValueError, match="already recorded"):
        live.record(batch[::-1], mech, batch=2)
    with pytest.raises(ValueError, match="next batch is 6"):
        live.record(batch, mech, batch=7)
    plain = AdaptiveSurvey(6, 0.5, utility="entropy", n_expected=600, random_seed=3)
    for batch, mech in reports:
        assert plain.next_subset().subset == mech.subset
        plain.record(batch, mech)
    _assert_same(live, plain)


DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import numpy as np

    from bayesldp.adaptive import AdaptiveSurvey

    path, n = Path(sys.argv[1]), int(sys.argv[2])
    x = np.random.default_rng(123).choice(6, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    if path.exists():
        survey = AdaptiveSurvey.resume(path)
    else:
        survey = AdaptiveSurvey(
            6, 1.0, utility="tv", batch_size=50, random_seed=7, n_expected=n, checkpoint=path
        )
    print("start", survey.n_users, flush=True)
    survey.simulate(x[survey.n_users :], progress=lambda done, total: print(
        "saved", survey.n_users, flush=True))
    print("done", survey.n_users, flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tmp_path):
    """Kill the survey process (SIGKILL) at seeded random points, resume until done."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    path = tmp_path / "killed.npz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gen = np.random.default_rng(2024)
    kills, starts = 0, []
    for _ in range(12):  # bounded number of (re)starts
        with subprocess.Popen(
            [sys.executable, str(driver), str(path), "3000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        ) as proc:
            wait_lines = int(gen.integers(1, 8)) if kills < 4 else 10**9
            lines, killed = [], False
            for line in proc.stdout:
                lines.append(line.split())
                if len(lines) >= wait_lines:
                    time.sleep(float(gen.uniform(0, 0.004)))  # inside a batch or a write
                    proc.send_signal(signal.SIGKILL)
                    killed = True
                    break
            _, err = proc.communicate(timeout=120)
        starts.append(int(lines[0][1]) if lines else None)
        if killed:
            kills += 1
            continue
        assert proc.returncode == 0, err
        assert lines[-1] == ["done", "3000"]
        break
    else:
        pytest.fail("the survey did not finish")
    assert kills == 4
    # each restart resumed where a saved state left off (nothing lost, nothing repeated)
    assert all(s is not None and s % 50 == 0 for s in starts)
    assert starts == sorted(starts)
    final = AdaptiveSurvey.resume(path, checkpoint=False)
    assert final.n_users == 3000 and final.n_batches == 60
    _assert_same(final, _reference())


# -------------------------------------------------------------------------------- errors
def _saved(tmp_path, name="state.npz"):
    path = tmp_path / name
    AdaptiveSurvey(6, 1.0, checkpoint=path, **CONFIG).simulate(_users(200))
    return path


def test_truncated_and_corrupt_files_raise(tmp_path):
    path = _saved(tmp_path)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable"):
        AdaptiveSurvey.resume(truncated)
    # flip bytes inside the stored arrays (an uncompressed zip): the checksum catches it
    flipped = bytearray(data)
    pos = data.index(b"row_of.npy") + 200
    flipped[pos : pos + 4] = bytes(b ^ 0xFF for b in flipped[pos : pos + 4])
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match=r"corrupt|not a readable"):
        AdaptiveSurvey.resume(corrupt)
    # a well-formed file whose content was altered: the SHA-256 checksum catches it
    with np.load(path) as stored:
        arrays = {name: stored[name] for name in stored.files}
    arrays["row_of"] = arrays["row_of"].copy()
    arrays["row_of"][3] = (arrays["row_of"][3] + 1) % (arrays["row_y"].size)
    altered = tmp_path / "altered.npz"
    np.savez(altered, **arrays)
    with pytest.raises(CheckpointError, match="checksum"):
        AdaptiveSurvey.resume(altered)
    # consistent checksum but impossible content (a report pointing at a missing row)
    arrays["row_of"][3] = arrays["row_y"].size + 5
    arrays["checksum"] = np.array(_digest(str(arrays["config"][()]), arrays))
    np.savez(altered, **arrays)
    with pytest.raises(CheckpointError, match="inconsistent"):
        AdaptiveSurvey.resume(altered)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError):
        AdaptiveSurvey.resume(empty)


def test_foreign_files_raise(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="not a readable"):
        AdaptiveSurvey.resume(text)
    other = tmp_path / "other.npz"
    np.savez(other, a=np.arange(3))
    with pytest.raises(CheckpointError, match="no format tag"):
        AdaptiveSurvey.resume(other)
    tagged = tmp_path / "tagged.npz"
    np.savez(tagged, format=np.array("something.else"), version=np.array(1))
    with pytest.raises(CheckpointError, match="not an AdaptiveSurvey state"):
        AdaptiveSurvey.resume(tagged)
    path = _saved(tmp_path)
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["version"] = np.array(99)
    future = tmp_path / "future.npz"
    np.savez(future, **arrays)
    with pytest.raises(CheckpointError, match="version 99"):
        AdaptiveSurvey.resume(future)
    with pytest.raises(CheckpointError, match="does not exist"):
        AdaptiveSurvey.resume(tmp_path / "missing.npz")


def test_existing_checkpoint_is_never_overwritten(tmp_path):
    path = _saved(tmp_path)
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match="already exists"):
        AdaptiveSurvey(6, 1.0, checkpoint=path)
    assert path.read_bytes() == before


def test_stale_temp_file_is_harmless(tmp_path):
    path = _saved(tmp_path)
    (tmp_path / "state.npz.tmp").write_bytes(b"half-written garbage")
    survey = AdaptiveSurvey.resume(path)
    survey.simulate(_users(100, 9))
    assert AdaptiveSurvey.resume(path).n_users == 300
    assert not (tmp_path / "state.npz.tmp").exists()
