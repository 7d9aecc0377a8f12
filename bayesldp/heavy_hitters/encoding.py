"""Fixed-width codes of open-ended items (str or bytes) for prefix-extending heavy hitters.

PEM (:mod:`bayesldp.heavy_hitters.pem`) walks down the bits of a fixed-width code of each item,
one prefix at a time.  The code here is a **keyed hash**: the first ``bits`` bits of
``BLAKE2b(item, key=key, digest_size=8)`` (big-endian), with ``str`` items encoded as UTF-8.

Why a keyed hash and not the raw bytes padded to ``max_length``:

* every prefix PEM reports goes through bayesldp's OLH (:class:`bayesldp.OLH`), whose hash family
  ``((a x + b) mod P) mod g`` takes inputs ``x < P = 2^31 - 1``; a code of at most 30 bits fits
  (``2^30 < P``), while the raw bytes of anything longer than 3 bytes do not;
* a hash spreads the items uniformly over the code space, so each round's prefixes split the
  population evenly; raw bytes pile every item sharing a beginning (``"http://www."``) into one
  prefix for several rounds, where it takes the places of the heavy hitters' own prefixes;
* the key is public (the collector publishes it with the survey) but chosen after the items
  exist, so nobody can craft items whose codes collide with a popular one's in advance.

The price: a code is not an item.  The collector recovers the items behind the discovered codes
by encoding a list of candidate items (a dictionary, the answers seen in a pilot, a crawl) with
the same key, :meth:`ItemEncoder.decode`; a heavy code no candidate maps to stays a code.  Two
distinct items share a code with probability ``2^-bits``; with ``M`` distinct items in the
population a given heavy hitter shares its code with another item with probability about
``M / 2^bits`` (0.4% for ``M = 2^16``, ``bits = 24``); the found frequency is then the sum.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters._blake2b import pack, packed_codes
from bayesldp.heavy_hitters._factorize import factorize_packed

#: the widest code: OLH's hash needs inputs below 2^31 - 1
MAX_BITS = 30
DEFAULT_KEY = b"bayesldp-pem"


def _as_bytes(item: object, index: int, max_length: int) -> bytes:
    if isinstance(item, str):
        data = item.encode("utf-8")
    elif isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
    else:
        raise InvalidTypeError(f"items[{index}]: expected str or bytes, got {type(item).__name__}")
    if len(data) > max_length:
        raise InvalidInputError(
            f"items[{index}]: is {len(data)} bytes long (UTF-8), more than max_length = "
            f"{max_length}"
        )
    return data


_SEPARATOR = "\x80"  # not ASCII, one byte in Latin-1


def _pack_ascii(items: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The bytes of ``items`` back to back and their lengths, if every item is an ASCII ``str``
    (else None): one join with a non-ASCII separator, one Latin-1 encode, and the separators'
    positions give the lengths (no Python call per item)."""
    try:
        joined = _SEPARATOR.join(items).encode("latin-1")
    except (TypeError, UnicodeEncodeError):  # an item is not a str, or not Latin-1
        return None
    buf = np.frombuffer(joined, dtype=np.uint8)
    high = np.flatnonzero(buf >= 0x80)
    if high.size != len(items) - 1:
        return None  # an item holds a character 0x80..0xff: not ASCII
    ends = np.append(high, buf.size)
    lengths = np.diff(ends, prepend=-1) - 1
    flat = np.delete(buf, high) if high.size else buf
    return flat, lengths


class ItemEncoder:
    """Keyed-hash codes of ``bits`` bits for items of at most ``max_length`` bytes.

    ``code(item) = int(BLAKE2b(item, key=key, digest_size=8)) >> (64 - bits)``, ``str`` items
    encoded as UTF-8 (see the module docstring for why a hash and not the raw bytes).

    Parameters
    ----------
    bits : int
        Code width, 1..30 (OLH takes inputs below ``2^31 - 1``).
    key : bytes or str
        The public hash key (at most 64 bytes), shared by clients and collector.
    max_length : int
        Longest item in bytes (UTF-8 for str); longer items are refused, never cut.

    Examples
    --------
    >>> from bayesldp.heavy_hitters import ItemEncoder
    >>> enc = ItemEncoder(bits=16, key="survey-2026")
    >>> codes = enc.encode(["apple", "pear", "apple"])
    >>> bool(codes[0] == codes[2]), enc.decode(codes[:1], ["pear", "apple"])
    (True, ['apple'])
    """

    def __init__(self, bits: int = 24, key: bytes | str = DEFAULT_KEY, max_length: int = 64):
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral):
            raise InvalidTypeError(f"bits: expected an integer in 1..{MAX_BITS}, got {bits!r}")
        if not 1 <= bits <= MAX_BITS:
            raise InvalidInputError(f"bits: must lie in 1..{MAX_BITS}, got {bits}")
        if isinstance(key, str):
            key = key.encode("utf-8")
        if not isinstance(key, bytes):
            raise InvalidTypeError(f"key: expected bytes or str, got {type(key).__name__}")
        if len(key) > 64:
            raise InvalidInputError(f"key: BLAKE2b takes at most 64 bytes, got {len(key)}")
        if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral):
            raise InvalidTypeError(f"max_length: expected an integer >= 1, got {max_length!r}")
        if max_length < 1:
            raise InvalidInputError(f"max_length: must be >= 1, got {max_length}")
        self.bits = int(bits)
        self.key = key
        self.max_length = int(max_length)

    def __repr__(self) -> str:
        return f"ItemEncoder(bits={self.bits}, key={self.key!r}, max_length={self.max_length})"

    @property
    def fingerprint(self) -> str:
        """A short public digest of ``(key, bits)``, stamped on reports to catch mismatches."""
        tag = hashlib.blake2b(self.key + bytes([self.bits]), digest_size=4, person=b"pemkey")
        return tag.hexdigest()

    def encode(self, items: Iterable[Any]) -> np.ndarray:
        """The codes (int64, in ``0..2^bits - 1``) of ``items`` (str or bytes).

        Hashes each distinct item once, all of them in one compiled BLAKE2b pass (the same
        digest as :mod:`hashlib`'s) over their bytes laid back to back.  Equal items are found
        first: when every item is an ASCII ``str``, by a compiled pass over all the users'
        bytes packed at once; otherwise by pandas' ``factorize`` of the objects.
        """
        labels, _, _, codes = self._encode_distinct(items)
        return codes[labels]

    def _encode_distinct(
        self, items: Iterable[Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(labels, flat, lengths, codes)``: each user's distinct item ``labels[i]`` (numbered
        in the order of first occurrence), the distinct items' bytes back to back and their
        lengths, and their codes (what :meth:`encode` and SFP's client share).

        The rule: if every item is an ASCII ``str``, all users' bytes are packed at once
        (:func:`_pack_ascii`) and equal items grouped by a compiled pass over those bytes
        (:func:`~bayesldp.heavy_hitters._factorize.factorize_packed`), no Python object hashed;
        otherwise (bytes, non-ASCII or other objects) pandas' ``factorize`` groups the objects
        and only the distinct ones are converted (:meth:`_pack`).  Both give the same labels.
        """
        import pandas as pd

        if isinstance(items, str | bytes):
            raise InvalidTypeError("items: expected a sequence of str or bytes, got one item")
        arr = np.asarray(list(items) if not isinstance(items, np.ndarray) else items, dtype=object)
        if arr.ndim != 1:
            raise InvalidInputError(f"items: expected a 1-d sequence, got shape {arr.shape}")
        if arr.size == 0:
            raise InvalidInputError("items: is empty; at least one item is needed")
        packed = _pack_ascii(arr.tolist())
        if packed is not None:
            flat, lengths = packed
            self._check_lengths(lengths)
            labels, _, flat, lengths = factorize_packed(flat, lengths)
        else:
            labels, uniques = pd.factorize(arr, use_na_sentinel=False)
            flat, lengths = self._pack(list(uniques), labels, arr)
        return labels, flat, lengths, packed_codes(flat, lengths, self.key, self.bits)

    def _check_lengths(self, lengths: np.ndarray) -> None:
        """Refuse the first item longer than ``max_length`` bytes (``lengths``: each item's)."""
        if lengths.size and int(lengths.max()) > self.max_length:
            i = int(np.argmax(lengths > self.max_length))
            raise InvalidInputError(
                f"items[{i}]: is {int(lengths[i])} bytes long (UTF-8), more than max_length = "
                f"{self.max_length}"
            )

    def _pack(
        self, uniques: list[Any], labels: np.ndarray, items: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """The bytes of the distinct items ``uniques`` back to back and their lengths.

        All ASCII ``str``: :func:`_pack_ascii`; all ``str``: one ``str.encode`` each.
        Otherwise, or if an item is too long, item by item in the order of their first user
        (``labels``: each user's distinct item), so an error names the first offending user and
        its own type (``items``: the users' items; pandas turns None into NaN in ``uniques``).
        """
        packed = _pack_ascii(uniques)
        try:
            if packed is None:
                packed = pack([str.encode(u, "utf-8") for u in uniques])  # TypeError: not str
            if packed[1].max() <= self.max_length:
                return packed
        except (TypeError, UnicodeEncodeError):
            pass
        first = np.full(len(uniques), labels.size, dtype=np.int64)
        np.minimum.at(first, labels, np.arange(labels.size))
        data = [b""] * len(uniques)
        for u in np.argsort(first, kind="stable"):
            data[u] = _as_bytes(items[first[u]], int(first[u]), self.max_length)
        return pack(data)

    def decode(self, codes: Any, candidates: Sequence[Any]) -> list[Any]:
        """The item among ``candidates`` behind each code (the first such), or None.

        A code is recoverable only through a candidate list: the hash is one-way.  The
        candidates are hashed as they come (no grouping: a repeated one costs a hash).
        """
        codes = np.asarray(codes, dtype=np.int64).ravel()
        cand = list(candidates)
        if not cand:
            return [None] * codes.size
        flat, lengths = self._pack(cand, np.arange(len(cand)), cand)
        own = packed_codes(flat, lengths, self.key, self.bits)
        wanted = np.unique(codes)  # few: look each candidate up among them, no sort of all
        if wanted.size == 0:
            return []
        at = np.minimum(np.searchsorted(wanted, own), wanted.size - 1)
        holders = np.flatnonzero(wanted[at] == own)  # candidates holding a wanted code, in order
        held, first = np.unique(at[holders], return_index=True)  # first holder of each
        holder = np.full(wanted.size, -1, dtype=np.int64)
        holder[held] = holders[first]
        who = holder[np.searchsorted(wanted, codes)]
        return [cand[j] if j >= 0 else None for j in who.tolist()]
