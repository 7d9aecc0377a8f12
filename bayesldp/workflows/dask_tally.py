"""Tally report files on Dask: batches of files as tasks, the tallies merged in a tree.

A tally is additive (:meth:`bayesldp.Tally.__add__`), so a collection of report files of any size
is tallied on the workers and only tallies travel: the files are dealt into one batch per
worker thread; each task reads its batch's CSV or Parquet files one after another
(:func:`~bayesldp.workflows.report_files.tally_file`), tallies each with the mechanism's own
layout (``mechanism.tally_frame``) and merges duplicate rows as it goes; the batches' tallies are
then summed in a binary tree, so no worker and not the client ever holds more than two tallies
and one file's reports at a time.

Schedulers: ``scheduler=None`` starts a ``dask.distributed`` LocalCluster (one single-threaded
worker process per core) for the call; an address (``"tcp://host:8786"``) connects to a running
cluster, and fails within ``timeout`` seconds, naming the address, when nothing answers there;
``"threads"`` or ``"synchronous"`` use dask's local schedulers without ``distributed`` (small jobs,
tests).  ``progress=True`` shows ``distributed``'s progress bar on stderr (the cluster's
dashboard shows the tasks too).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bayesldp._optional import require
from bayesldp.errors import BayesLDPError, InvalidInputError
from bayesldp.mechanisms.base import Mechanism
from bayesldp.tally import Tally
from bayesldp.workflows.report_files import COMPRESSED, tally_file

__all__ = ["report_files", "tally_reports"]

#: file suffixes read as reports
SUFFIXES = (".csv", ".parquet", ".pq")
LOCAL_SCHEDULERS = ("threads", "synchronous")
#: batches of files per worker thread: the files are dealt round-robin, so batches hold similar
#: amounts; more tasks added the scheduler's fixed cost per task to sub-second jobs
#: (``benchmarks/scale.py``: with one task per file, 2 workers ran 1.52x one where plain
#: processes ran 1.63x)
TASKS_PER_WORKER = 1


def report_files(source: Any) -> list[Path]:
    """The report files of ``source``: a directory (its CSV and Parquet files, sorted), one path,
    a glob pattern, or a list of paths.  A path that exists is that file even when its name holds
    glob characters (``survey[2024].csv``); only a path that does not exist is expanded.

    Nothing is skipped or counted twice without a word: a link to a missing file, a compressed
    report file (``.csv.gz``) and two names of one file (a link beside its target) are errors
    naming them.

    Examples
    --------
    A directory's CSV and Parquet files, sorted:

    >>> import tempfile, pathlib
    >>> from bayesldp.workflows.dask_tally import report_files
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ["b.csv", "a.csv", "notes.txt"]:
    ...     _ = (d / name).write_text("value")
    >>> [p.name for p in report_files(d)]
    ['a.csv', 'b.csv']
    """
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            try:
                entries = sorted(path.iterdir())
            except OSError as exc:
                raise InvalidInputError(
                    f"source: cannot list the directory {path}: {exc.strerror or exc}"
                ) from None
            _check_unreadable_entries(path, entries)
            files = [  # a sub-directory named x.csv holds no reports of this one
                p for p in entries if p.suffix.lower() in SUFFIXES and p.is_file()
            ]
        elif path.exists() or not any(ch in str(source) for ch in "*?["):
            files = [path]  # a path that exists is that file, whatever characters it holds
        else:
            files = sorted(Path(p) for p in glob.glob(str(source)))
            if not files:
                raise InvalidInputError(
                    f"source: no such file {source}, and as a glob pattern it matches no file"
                )
    elif isinstance(source, Iterable):
        files = [Path(p) for p in source]
    else:
        raise InvalidInputError(
            f"source: expected a directory, a glob pattern or a list of files, got "
            f"{type(source).__name__}"
        )
    if not files:
        raise InvalidInputError(f"source: no CSV or Parquet files in {source!r}")
    folders = [str(p) for p in files if p.is_dir()]
    if folders:
        raise InvalidInputError(f"source: {folders[0]} is a directory, not a report file")
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        link = " (a link to a missing file)" if Path(missing[0]).is_symlink() else ""
        raise InvalidInputError(
            f"source: no such file {missing[0]}{link} ({len(missing)} missing)"
        )
    _check_distinct_files(files)
    return files


def _check_unreadable_entries(folder: Path, entries: list[Path]) -> None:
    """A directory's report files that would otherwise be left out without a word: links to
    missing files and compressed report files."""
    dangling = [p.name for p in entries if p.is_symlink() and not p.exists()
                and p.suffix.lower() in SUFFIXES]  # fmt: skip
    if dangling:
        raise InvalidInputError(
            f"source: {folder} holds links to missing files ({', '.join(dangling[:3])}"
            f"{', ...' if len(dangling) > 3 else ''}): an unmounted volume? Their reports "
            "cannot be counted; restore or remove the links"
        )
    packed = [p.name for p in entries if p.suffix.lower() in COMPRESSED
              and Path(p.stem).suffix.lower() in SUFFIXES]  # fmt: skip
    if packed:
        raise InvalidInputError(
            f"source: {folder} holds compressed report files ({', '.join(packed[:3])}"
            f"{', ...' if len(packed) > 3 else ''}), which are not read; decompress them "
            "(e.g. gunzip) or move them out"
        )


def _check_distinct_files(files: list[Path]) -> None:
    """No file given twice under two names (a link beside its target): its reports would be
    counted twice."""
    seen: dict[str, Path] = {}
    for path in files:
        real = os.path.realpath(path)
        if real in seen:
            raise InvalidInputError(
                f"source: {seen[real]} and {path} are the same file ({real}); its reports would "
                "be counted twice: remove the link, or name the file once"
            )
        seen[real] = path


def _tally_file(path: Path, mechanism: Mechanism) -> Tally:
    """One file's tally, duplicate rows merged (the compression a per-report tally allows)."""
    return tally_file(mechanism, path, threads=False).deduplicated()


class _Refused:
    """A batch's expected refusal (a bad file: a package error), returned by the task rather
    than raised, so no worker logs a "Compute Failed" traceback for it; raised again here."""

    def __init__(self, error: BayesLDPError) -> None:
        self.error = error


def _merge(a: Tally | _Refused, b: Tally | _Refused) -> Tally | _Refused:
    if isinstance(a, _Refused) or isinstance(b, _Refused):
        return a if isinstance(a, _Refused) else b
    return (a + b).deduplicated()


def _tally_batch(paths: list[Path], mechanism: Mechanism) -> Tally | _Refused:
    """The tally of a batch of files, read one after another (one file's reports at a time)."""
    try:
        total = _tally_file(paths[0], mechanism)
        for path in paths[1:]:
            total = _merge(total, _tally_file(path, mechanism))
    except BayesLDPError as exc:
        return _Refused(exc)
    return total


def _result(value: Tally | _Refused) -> Tally:
    if isinstance(value, _Refused):
        raise value.error
    return value


def _graph(files: list[Path], mechanism: Mechanism, workers: int) -> Any:
    """The delayed tally: ``TASKS_PER_WORKER`` batches of files per worker (dealt round-robin),
    merged in a tree.  Fewer, larger tasks than one per file: each task costs the scheduler a
    fixed overhead that a sub-second file would feel."""
    dask = require("dask", "a tally of many report files")

    n_batches = max(1, min(len(files), TASKS_PER_WORKER * workers))
    batches = [files[i::n_batches] for i in range(n_batches)]
    batch_task = dask.delayed(_tally_batch, pure=True)
    merge_task = dask.delayed(_merge, pure=True)
    return _tree([batch_task(batch, mechanism) for batch in batches], merge_task)


def _tree(items: list[Any], merge: Any) -> Any:
    """Pairwise merges, ``ceil(log2(len))`` levels deep."""
    while len(items) > 1:
        pairs = [merge(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = pairs + ([items[-1]] if len(items) % 2 else [])
    return items[0]


def tally_reports(
    source: Any,
    mechanism: Mechanism,
    *,
    scheduler: str | None = None,
    timeout: float = 10.0,
    progress: bool = False,
) -> Tally:
    """The tally of every report in ``source``, computed on Dask.

    Parameters
    ----------
    source : directory, glob pattern, path or list of paths
        CSV or Parquet report files in ``mechanism``'s layout (``bayesldp estimate --help``).
    mechanism : Mechanism
        The mechanism every report was collected with.
    scheduler : str, optional
        None: a LocalCluster for this call; a ``dask.distributed`` scheduler address; or
        ``"threads"`` / ``"synchronous"`` (dask's local schedulers).
    timeout : float
        Seconds to wait for a scheduler address to answer.
    progress : bool
        Show a progress bar (distributed schedulers).

    Returns
    -------
    Tally
        Equal to the sum of the files' tallies (a file that is not this mechanism's reports is an
        :class:`~bayesldp.InvalidInputError` naming the file and the column).

    Examples
    --------
    Two days of reports, tallied with dask's synchronous scheduler (a cluster in real use):

    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.workflows.dask_tally import tally_reports
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for day in range(2):
    ...     reports = mech.perturb(np.array([0, 1, 2, 0]), rng=day)
    ...     mech.reports_to_frame(reports).to_csv(d / f"day{day}.csv", index=False)
    >>> tally_reports(d, mech, scheduler="synchronous").n
    8
    """
    if not isinstance(mechanism, Mechanism):
        raise InvalidInputError(
            f"mechanism: expected a bayesldp mechanism, got {type(mechanism).__name__}"
        )
    _check_scheduler(scheduler)
    files = report_files(source)
    if scheduler in LOCAL_SCHEDULERS:
        return _result(_graph(files, mechanism, os.cpu_count() or 1).compute(scheduler=scheduler))
    return _result(_compute_distributed(files, mechanism, scheduler, timeout, progress))


def _check_scheduler(scheduler: Any) -> None:
    """None, a local scheduler's name or a scheduler address (``tcp://host:port``,
    ``host:port``), else one line saying what is valid (not distributed's ValueError)."""
    if scheduler is None or scheduler in LOCAL_SCHEDULERS:
        return
    address = re.fullmatch(r"([a-z]+://)?[^\s:/]+:\d+|[a-z]+://\S+", str(scheduler))
    if not isinstance(scheduler, str) or address is None:
        raise InvalidInputError(
            f"scheduler: {scheduler!r} is not local, {', '.join(LOCAL_SCHEDULERS)} or a Dask "
            "scheduler address such as tcp://10.0.0.5:8786"
        )


@contextlib.contextmanager
def _workers_ignore_ctrl_c():
    """Start worker processes with SIGINT ignored (an ignored signal stays ignored in a spawned
    process): Ctrl-C reaches the whole process group, and only this process should answer it
    (one line; the cluster is closed with it), not every worker with its own traceback.  Here
    a Ctrl-C during the start is held, then raised once the workers are up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # blocked and ignored: the workers inherit the ignoring (across exec); here Linux keeps a
    # blocked signal pending even while ignored, so it is delivered once unblocked
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _compute_distributed(
    files: list[Path], mechanism: Mechanism, address: str | None, timeout: float, progress: bool
) -> Tally:
    distributed = require("distributed", "a tally on dask's distributed scheduler")
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    show_progress = distributed.progress

    if address is None:
        # CRITICAL, not ERROR: a worker whose heartbeat races the scheduler's shutdown logs a
        # traceback at ERROR after the result is in (seen once in CI); a task's failure reaches
        # the client as its exception, and a lost worker as distributed's KilledWorker.
        with _workers_ignore_ctrl_c():
            cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, dashboard_address=":0",
                                   silence_logs=logging.CRITICAL)  # fmt: skip
        client = Client(cluster)
    else:
        cluster = None
        try:
            client = Client(address, timeout=f"{timeout}s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InvalidInputError(
                f"scheduler: no Dask scheduler answered at {address} within {timeout:g} s ({exc})"
            ) from None
    try:
        workers = sum(client.nthreads().values()) or 1
        future = client.compute(_graph(files, mechanism, workers))
        if progress:  # distributed's text bar prints to stdout: keep stdout for results
            with contextlib.redirect_stdout(sys.stderr):
                show_progress(future)
        return future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
