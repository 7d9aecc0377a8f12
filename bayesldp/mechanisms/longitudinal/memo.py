"""The memo of permanent responses: one per (user, value), in memory or in a durable file.

A longitudinal mechanism draws a user's *permanent* randomised response once per true value
and reuses it in every later round (Erlingsson et al. 2014's memoisation; Arcolezi et al. 2022):
otherwise averaging the rounds would reveal the value.  :class:`Memo` keeps these responses
in memory, keyed by ``user * k + value`` in one sorted int64 array, so that a round's lookup is
a vectorised ``searchsorted`` and new entries are merged with ``np.insert`` (no per-user Python
loop).  It is a read-only :class:`~collections.abc.Mapping` from ``(user, value)`` to the
permanent response (an int for L-GRR, a bool bit vector for the unary ones).

:class:`MemoStore` is the same memo in a file (one file per store): it takes the file's writer
lock for its whole life (a second writer is refused, naming the process that holds it), loads the
file (refusing a corrupt one or one written for another mechanism, ``k`` or epsilon) and rewrites
it atomically (temporary file, fsync, rename; :mod:`bayesldp._durable`) *before* a round's
reports are returned, so a report never goes out on a permanent response the file lacks.  The
path is resolved first (symbolic links followed): a link and its target share one lock and one
file, and the link stays a link; a link whose target is missing is refused rather than started
empty (users would redraw their permanent responses).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numba import njit

from bayesldp._durable import StateFormat, file_lock, read_state, write_state
from bayesldp._validation import one_d_array
from bayesldp.errors import InvalidInputError, InvalidTypeError


class _MemoOwner(Protocol):
    """What a memo reads of its mechanism (``Longitudinal``, RAPPOR or dBitFlipPM);
    declared here, not imported: the longitudinal mechanisms import this module."""

    k: int

    def params(self) -> dict[str, Any]: ...

    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]: ...

    def decode_permanent(self, responses: np.ndarray) -> np.ndarray: ...

    def valid_permanent(self, responses: np.ndarray) -> bool: ...


class MemoError(InvalidInputError):
    """A memo store is missing, corrupt, truncated, or belongs to another mechanism.

    Examples
    --------
    A memo file written for another mechanism is refused:

    >>> import tempfile, pathlib
    >>> import bayesldp
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "memo.npz"
    >>> bayesldp.MemoStore(path, bayesldp.LGRR(4, 1.0, eps_perm=3.0)).close()
    >>> bayesldp.MemoStore(path, bayesldp.LGRR(5, 1.0, eps_perm=3.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    bayesldp.mechanisms.longitudinal.memo.MemoError: ...
    """


FORMAT = StateFormat(
    "bayesldp.PermanentMemo",
    1,
    ("keys", "responses"),
    what="memo",
    kind="permanent-response memo",
    error=MemoError,
)


#: ids spanning fewer than this many times their number are checked for repeats with a bitmap
#: (at most 8 bytes per id, one pass); wider ones are sorted
_BITMAP_SPAN = 64


def memo_keys(users: Any, x: np.ndarray, k: int) -> np.ndarray:
    """``users * k + x`` as int64, after checking ``users``: one non-negative integer per value
    of ``x``, each user at most once (one report per user and round); ``k`` is the memo's
    :attr:`Memo.width` (the values a user's entries are keyed by)."""
    users = one_d_array(users, "users")
    if users.dtype.kind not in "iu":
        raise InvalidTypeError(f"users: expected integer user ids, got dtype {users.dtype}")
    if users.shape != x.shape:
        raise InvalidInputError(
            f"users: expected one id per value ({x.shape[0]}), got {users.shape[0]}"
        )
    limit = (np.iinfo(np.int64).max - (k - 1)) // k
    if users.min() < 0 or users.max() > limit:
        bad = users.min() if users.min() < 0 else users.max()
        raise InvalidInputError(
            f"users: ids must lie in 0..{limit:,} (k = {k}), got {bad}; map other ids "
            "(strings, hashes) to such integers first"
        )
    users = users.astype(np.int64, copy=False)
    low, span = int(users.min()), int(users.max()) - int(users.min())
    if span >= _BITMAP_SPAN * users.size or _repeats(users, low, span):  # else all distinct
        ordered = np.sort(users)
        twice = np.flatnonzero(ordered[1:] == ordered[:-1])
        if twice.size:
            raise InvalidInputError(
                f"users: user {ordered[twice[0]]} appears twice in one round; a round holds at "
                "most one report per user"
            )
    return users * k + x


@njit(cache=True, nogil=True)
def _repeats(users, low, span):  # pragma: no cover - compiled
    """Whether some id occurs twice in ``users`` (all in ``low .. low + span``): one pass
    marking each id in a bitmap of ``span + 1`` bits."""
    seen = np.zeros((span >> 6) + 1, dtype=np.uint64)
    one = np.uint64(1)
    for user in users:
        offset = user - low
        bit = one << np.uint64(offset & 63)
        if seen[offset >> 6] & bit:
            return True
        seen[offset >> 6] |= bit
    return False


def _describe(config: dict[str, Any]) -> str:
    """The stored mechanism as its repr (as the user wrote it), else its name and params."""
    from bayesldp.mechanisms.registry import rebuild_mechanism

    name, params = str(config.get("mechanism")), config.get("params")
    try:
        return repr(rebuild_mechanism(name, dict(params)))
    except Exception:  # another format's config: show what it says
        return f"{name} {params!r}"


def checked_memo(memo: Any, users: Any, mechanism: Any) -> Memo:
    """``memo`` when it is a :class:`Memo` of ``mechanism`` and ``users`` are given (a memo is
    keyed by user); else a one-line error naming what is wrong."""
    if not isinstance(memo, Memo):
        raise InvalidInputError(
            f"memo: expected a bayesldp Memo or MemoStore, got {type(memo).__name__}"
        )
    if users is None:
        raise InvalidInputError("users: the memo is keyed by user; pass users=")
    memo.check_mechanism(mechanism)
    return memo


class Memo(Mapping):
    """The permanent responses of one longitudinal mechanism, in memory.

    ``memo[(user, value)]`` is the permanent response drawn for that user and value (an int
    for L-GRR, a bool vector of ``k`` bits for the unary mechanisms); ``len(memo)`` the number
    of (user, value) pairs seen.  Pass it as ``memo=`` to the mechanism's ``perturb``.

    Parameters
    ----------
    mechanism : Longitudinal
        The mechanism whose permanent responses it keeps (refused by any other).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.LGRR(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), sorted(memo)[:2]
    (4, [(10, 0), (11, 1)])
    >>> memo[(10, 0)] == memo[(10, 0)]
    True
    """

    def __init__(self, mechanism: _MemoOwner) -> None:
        # what a memo needs of its mechanism (_MemoOwner: checked here, at run time)
        if not callable(getattr(mechanism, "memo_layout", None)):
            raise InvalidTypeError(
                f"mechanism: a memo keeps permanent responses of a longitudinal mechanism "
                f"(LGRR, LSUE, LOUE, LOSUE, LSOUE, RAPPOR, DBitFlipPM), got "
                f"{type(mechanism).__name__}"
            )
        self.mechanism = mechanism
        #: entries per user: keys are ``user * width + value`` (``k`` unless the mechanism's
        #: ``memo_width()`` says otherwise: dBitFlipPM keys a user's entries by bucket slot)
        width = getattr(mechanism, "memo_width", None)
        self.width = int(width()) if callable(width) else int(mechanism.k)
        dtype, shape = mechanism.memo_layout()
        self.codes = np.empty(0, dtype=np.int64)
        self.responses = np.empty((0, *shape), dtype=dtype)

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, key: tuple[int, int]) -> Any:
        user, value = key
        k = self.width
        if not 0 <= value < k or user < 0:
            raise KeyError(key)
        code = int(user) * k + int(value)
        pos = int(np.searchsorted(self.codes, code))
        if pos == self.codes.size or self.codes[pos] != code:
            raise KeyError(key)
        entry = getattr(self.mechanism, "memo_entry", None)
        if callable(entry):  # a structured entry (RAPPOR's cohort and bits, dBitFlipPM's)
            return entry(self.responses[pos])
        value = self.mechanism.decode_permanent(self.responses[pos : pos + 1])[0]
        return value.item() if np.ndim(value) == 0 else value

    def __iter__(self) -> Iterator[tuple[int, int]]:
        k = self.width
        for code in self.codes.tolist():
            yield divmod(code, k)

    def __len__(self) -> int:
        return int(self.codes.size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mechanism!r}, {len(self):,} entries)"

    # ------------------------------------------------------------------ vectorised access
    def check_mechanism(self, mechanism: _MemoOwner) -> None:
        """Raise :class:`MemoError` unless this memo belongs to ``mechanism``."""
        if mechanism != self.mechanism:
            raise MemoError(
                f"memo: it holds the permanent responses of {self.mechanism!r}, not of "
                f"{mechanism!r}; use a memo of that mechanism"
            )

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found, pos)``: which ``keys`` are in the memo and where (``searchsorted``)."""
        pos = np.searchsorted(self.codes, keys)
        if not self.codes.size:
            return np.zeros(keys.shape, dtype=bool), pos
        # a key past the last code has pos = size, and the last code is below it
        return self.codes[np.minimum(pos, self.codes.size - 1)] == keys, pos

    def lookup(self, keys: np.ndarray, layout: tuple[Any, tuple[int, ...]]
               ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """``(stored, missing)``: an array of ``keys.size`` entries of ``layout`` (dtype,
        shape) holding the memo's entry of each key found, and the positions of the keys not
        found (their entries are for the caller to fill)."""
        found, pos = self.find(keys)
        if found.all():  # a later round: one gather, no mask
            return np.take(self.responses, pos, axis=0), np.empty(0, dtype=np.intp)
        dtype, shape = layout
        stored = np.empty((keys.size, *shape), dtype=dtype)
        stored[found] = self.responses[pos[found]]
        return stored, np.flatnonzero(~found)

    def user_entries(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(has, pos)``: which ``users`` hold some entry already and the position of their
        first one (entries of a user are contiguous: keys sort by user first)."""
        pos = np.searchsorted(self.codes, users * self.width)
        has = np.zeros(users.shape, dtype=bool)
        inside = pos < self.codes.size
        has[inside] = self.codes[pos[inside]] // self.width == users[inside]
        return has, pos

    def insert(self, keys: np.ndarray, responses: np.ndarray, *, owned: bool = False) -> None:
        """Add new entries (keys not yet in the memo, distinct), keeping the keys sorted: a
        merge of the sorted new keys into the codes (new arrays; the old ones are untouched).
        ``owned``: the caller hands ``keys`` and ``responses`` over (arrays it made and no
        longer uses), so an empty memo keeps them without a copy."""
        if keys.size > 1 and not np.all(keys[1:] > keys[:-1]):
            order = np.argsort(keys, kind="stable")
            keys, responses = keys[order], responses[order]
        if not self.codes.size:
            self._commit(keys if owned else keys.copy(), responses if owned else responses.copy())
            return
        total = self.codes.size + keys.size
        at = np.searchsorted(self.codes, keys) + np.arange(keys.size)  # places in the merge
        old = np.ones(total, dtype=bool)
        old[at] = False
        codes = np.empty(total, dtype=self.codes.dtype)
        codes[at], codes[old] = keys, self.codes
        merged = np.empty((total, *self.responses.shape[1:]), dtype=self.responses.dtype)
        merged[at], merged[old] = responses, self.responses
        self._commit(codes, merged)

    def _commit(self, keys: np.ndarray, responses: np.ndarray) -> None:
        self.codes, self.responses = keys, responses


def resolved_memo_path(path: str | os.PathLike[str]) -> Path:
    """The memo file ``path`` names, symbolic links followed (absolute); a one-line
    :class:`MemoError` for a link whose target is missing, a missing directory or a directory.
    """
    given = Path(path)
    for link in (given, *given.parents):
        if link.is_symlink() and not link.exists():  # dangling, through any chain of links
            raise MemoError(
                f"memo: {str(link)!r} is a symbolic link to {os.readlink(link)!r}, which does "
                f"not exist (an unmounted volume?); a new memo there would let every user "
                "redraw their permanent responses: restore the target, or remove the link to "
                "start a new memo"
            )
    resolved = given.resolve()
    if not resolved.parent.is_dir():
        raise MemoError(f"memo: the directory of {str(given)!r} does not exist")
    if resolved.is_dir():
        raise MemoError(f"memo: {str(given)!r} is a directory; give a file name")
    return resolved


class MemoStore(Memo):
    """A :class:`Memo` kept in a file, one writer at a time.

    ``path`` is resolved first (symbolic links followed, :func:`resolved_memo_path`): the lock
    and the writes are the target's, so a link and its target are one memo and the link is
    kept; a link to a missing target (an unmounted volume, say) is a :class:`MemoError`, as a
    new, empty memo there would let every user redraw their permanent responses.

    Opening takes the writer lock (the file ``PATH.lock`` next to the target; a second writer,
    in this process or another, is refused with "memo: PATH is in use by process N" after
    ``wait`` seconds) and loads ``path`` if it exists (else creates it, empty).  Every round
    that draws new permanent responses rewrites the file atomically before its reports are
    returned.  Close it (or use it as a context manager) to release the lock.

    Parameters
    ----------
    path : str or PathLike
        The memo file (a ``.npz``: format tag, version, the mechanism's name and parameters,
        sorted keys, responses and a SHA-256 checksum over all of them).
    mechanism : Longitudinal
        The mechanism it belongs to; a file written for another mechanism, ``k`` or epsilon is
        refused with a :class:`MemoError` naming both.
    wait : float, default 0
        Seconds to wait for another writer's lock.

    Examples
    --------
    The permanent responses survive a restart: a second store on the same file reads them:

    >>> import tempfile, pathlib
    >>> import bayesldp
    >>> mech = bayesldp.LGRR(4, 1.0, eps_perm=3.0)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "memo.npz"
    >>> with bayesldp.MemoStore(path, mech) as memo:
    ...     day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> with bayesldp.MemoStore(path, mech) as memo:
    ...     print(len(memo))
    4
    """

    def __init__(self, path: str | os.PathLike[str], mechanism: _MemoOwner, *, wait: float = 0.0):
        super().__init__(mechanism)
        self._stack = None
        self.path = resolved_memo_path(path)
        lock = self.path.with_name(self.path.name + ".lock")
        if lock.is_dir():
            raise MemoError(
                f"memo: the lock file {str(lock)!r} is a directory; remove it (the memo's writer "
                "lock is a file created and removed by each writer)"
            )
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(file_lock(lock, self.path, wait, "memo: "))
        try:
            if self.path.exists():
                self._load()
            else:
                self._commit(self.codes, self.responses)
        except BaseException:
            self._stack.close()
            raise

    def _config(self) -> dict[str, Any]:
        return {"mechanism": type(self.mechanism).__name__, "params": self.mechanism.params()}

    def _load(self) -> None:
        config, arrays = read_state(FORMAT, self.path)
        own = json.loads(json.dumps(self._config()))
        if config != own:
            stored = _describe(config)
            raise MemoError(
                f"memo: {str(self.path)!r} holds the permanent responses of {stored}, not of "
                f"{self.mechanism!r}; use that mechanism or another memo file"
            )
        keys, responses = arrays["keys"], arrays["responses"]
        dtype, shape = self.mechanism.memo_layout()
        problem = None
        if keys.dtype != np.int64 or keys.ndim != 1:
            problem = f"keys of dtype {keys.dtype} and shape {keys.shape}"
        elif responses.dtype != dtype or responses.shape != (keys.size, *shape):
            problem = f"responses of dtype {responses.dtype} and shape {responses.shape}"
        elif keys.size and (keys[0] < 0 or np.any(keys[1:] <= keys[:-1])):
            problem = "keys that are not distinct, sorted and non-negative"
        elif not self.mechanism.valid_permanent(responses):
            problem = "responses outside the permanent response's alphabet"
        if problem is not None:
            raise MemoError(f"memo: {str(self.path)!r} is inconsistent ({problem})")
        self.codes, self.responses = keys, responses

    def _commit(self, keys: np.ndarray, responses: np.ndarray) -> None:
        if getattr(self, "_stack", None) is None:
            raise MemoError(f"memo: {str(self.path)!r} is closed; open it again to write")
        write_state(FORMAT, self.path, self._config(), {"keys": keys, "responses": responses})
        super()._commit(keys, responses)

    def close(self) -> None:
        """Release the writer lock (the file stays; it was written after every round)."""
        if getattr(self, "_stack", None) is not None:
            self._stack.close()
            self._stack = None

    def __enter__(self) -> MemoStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
