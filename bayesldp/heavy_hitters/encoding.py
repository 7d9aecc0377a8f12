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

The other code, :class:`PositionalEncoder`, is for items of a fixed length over a declared
alphabet (5 hex digits, a 6-letter code): the item read as a base-``|A|`` number, ``ceil(L log2
|A|)`` bits, injective and decoded back to the item with no dictionary.  When it fits in
``MAX_BITS`` and is no wider than the hash code it costs PEM fewer rounds; the rule is in
:class:`~bayesldp.heavy_hitters.PEM`'s docstring.  :func:`make_encoder` picks PEM's code.
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
DEFAULT_BITS = 24
DEFAULT_MAX_LENGTH = 64


def _as_bytes(item: object, index: int, max_length: int) -> bytes:
    if isinstance(item, str):
        try:
            data = item.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no UTF-8 bytes
            raise InvalidInputError(
                f"items[{index}]: {item[:40]!r} holds {item[exc.start]!r} at position "
                f"{exc.start}, a lone surrogate that has no UTF-8 encoding; give valid text "
                "(or bytes)"
            ) from None
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


def _item_array(items: Iterable[Any]) -> np.ndarray:
    """``items`` as a non-empty 1-d object array (one str or bytes is refused: not a sequence)."""
    if isinstance(items, str | bytes):
        raise InvalidTypeError("items: expected a sequence of str or bytes, got one item")
    if isinstance(items, np.ndarray):
        arr = items.astype(object, copy=False)
    else:  # fromiter keeps a bytearray or memoryview item whole (asarray would unpack it)
        seq = list(items)
        arr = np.fromiter(seq, dtype=object, count=len(seq))
    if arr.ndim != 1:
        raise InvalidInputError(f"items: expected a 1-d sequence, got shape {arr.shape}")
    if arr.size == 0:
        raise InvalidInputError("items: is empty; at least one item is needed")
    return arr


def _factorize_items(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pandas' ``factorize`` of the items: each user's distinct-item label and the distinct
    items.  A ``bytearray`` or ``memoryview`` item (not hashable) is read as its ``bytes``; any
    other unhashable item is refused, naming the first."""
    import pandas as pd

    try:
        return pd.factorize(arr, use_na_sentinel=False)
    except TypeError:
        pass
    for i, item in enumerate(arr.tolist()):
        if not isinstance(item, str | bytes | bytearray | memoryview):
            raise InvalidTypeError(f"items[{i}]: expected str or bytes, got {type(item).__name__}")
    fixed = [bytes(x) if isinstance(x, bytearray | memoryview) else x for x in arr.tolist()]
    return pd.factorize(np.fromiter(fixed, dtype=object, count=len(fixed)), use_na_sentinel=False)


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

    #: a code names an item only through candidates (:meth:`decode`)
    names_items = False

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
        arr = _item_array(items)
        packed = _pack_ascii(arr.tolist())
        if packed is not None:
            flat, lengths = packed
            self._check_lengths(lengths)
            labels, _, flat, lengths = factorize_packed(flat, lengths)
        else:
            labels, uniques = _factorize_items(arr)
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


class PositionalEncoder:
    """Positional codes of items of exactly ``length`` characters over ``alphabet``.

    The item ``x = x_0 x_1 ... x_{L-1}`` read as a base-``|A|`` number, first character most
    significant:

    .. math:: \\text{code}(x) = \\sum_{j=0}^{L-1} \\text{index}(x_j)\\,|A|^{L-1-j},
              \\qquad \\text{bits} = \\lceil L \\log_2 |A| \\rceil,

    so the code is injective, the codes' order is the items' lexicographic order (in the
    alphabet's order), and a code names its item with no dictionary (:meth:`decode`).  When
    ``|A|`` is a power of two each character takes ``log2 |A|`` bits and a bit prefix of the
    code is a character prefix of the item: PEM's rounds then walk the characters, as pure-ldp's
    PEM (Wang, Li, Jha, IEEE TDSC 2019, section 5) does.  The codes ``|A|^L .. 2^bits - 1`` name
    no item (when ``|A|`` is not a power of two) and :meth:`decode` gives None for them.

    Against :class:`ItemEncoder`'s keyed hash: no collision and exact names, and a code no wider
    than the items need (fewer PEM rounds, each read by more users; the rule and its measured
    reason are in :class:`~bayesldp.heavy_hitters.PEM`'s docstring); but only for fixed-length
    items over a known alphabet, at most 30 bits (``MAX_BITS``, OLH's inputs), and items that
    share a beginning share the prefixes of every early round (the hash spreads them).

    Parameters
    ----------
    alphabet : str
        The symbols, distinct, in their order (at least 2); ASCII bytes are read as str.
    length : int
        Every item's number of characters; an item of another length, or holding a symbol
        outside the alphabet, is refused naming its index.

    Examples
    --------
    >>> from bayesldp.heavy_hitters import PositionalEncoder
    >>> enc = PositionalEncoder("0123456789abcdef", 5)
    >>> codes = enc.encode(["000ff", "a0001"])
    >>> enc.bits, [hex(int(c)) for c in codes], enc.decode(codes)
    (20, ['0xff', '0xa0001'], ['000ff', 'a0001'])
    """

    #: a code names its item (:meth:`decode` needs no candidates)
    names_items = True

    def __init__(self, alphabet: str | bytes, length: int):
        if isinstance(alphabet, bytes):
            try:
                alphabet = alphabet.decode("ascii")
            except UnicodeDecodeError:
                raise InvalidInputError("alphabet: bytes must be ASCII; give a str") from None
        if not isinstance(alphabet, str):
            raise InvalidTypeError(
                f"alphabet: expected a str of symbols, got {type(alphabet).__name__}"
            )
        if len(alphabet) < 2:
            raise InvalidInputError(f"alphabet: needs at least 2 symbols, got {alphabet!r}")
        if len(set(alphabet)) != len(alphabet):
            twice = next(c for i, c in enumerate(alphabet) if c in alphabet[:i])
            raise InvalidInputError(f"alphabet: {twice!r} appears more than once")
        if isinstance(length, bool) or not isinstance(length, numbers.Integral):
            raise InvalidTypeError(f"length: expected an integer >= 1, got {length!r}")
        if length < 1:
            raise InvalidInputError(f"length: must be >= 1, got {length}")
        self.alphabet, self.length = alphabet, int(length)
        self.size = len(alphabet) ** self.length  # codes 0..size-1 name items (Python int)
        self.bits = (self.size - 1).bit_length()  # ceil(L log2 |A|), exactly
        if self.bits > MAX_BITS:
            raise InvalidInputError(
                f"alphabet, length: the positional code of {self.length} symbols of "
                f"{len(alphabet)} needs {self.bits} bits, more than MAX_BITS = {MAX_BITS} (OLH "
                "takes inputs below 2^31 - 1); use the keyed hash code (ItemEncoder)"
            )
        self._index = {c: i for i, c in enumerate(alphabet)}
        self._table: np.ndarray | None = None  # byte -> symbol index (-1: none), ASCII only
        if alphabet.isascii():
            self._table = np.full(256, -1, dtype=np.int16)
            self._table[np.frombuffer(alphabet.encode("ascii"), dtype=np.uint8)] = np.arange(
                len(alphabet)
            )

    def __repr__(self) -> str:
        return f"PositionalEncoder(alphabet={self.alphabet!r}, length={self.length})"

    @property
    def fingerprint(self) -> str:
        """A short public digest of ``(alphabet, length)``, stamped on reports to catch
        mismatches (its own BLAKE2b personalisation: never an :class:`ItemEncoder`'s)."""
        data = self.alphabet.encode("utf-8") + b"\x00" + self.length.to_bytes(4, "big")
        return hashlib.blake2b(data, digest_size=4, person=b"pempos").hexdigest()

    def encode(self, items: Iterable[Any]) -> np.ndarray:
        """The codes (int64, in ``0..|A|^L - 1``) of ``items`` (str, or UTF-8 bytes).

        When the alphabet and every item are ASCII ``str``, all users' characters are packed
        at once (:func:`_pack_ascii`) and looked up in a 256-entry table, the code accumulated
        one position at a time over all users (no Python call per item); otherwise each
        distinct item (pandas' ``factorize``) is read symbol by symbol.
        """
        arr = _item_array(items)
        packed = _pack_ascii(arr.tolist()) if self._table is not None else None
        if packed is None:
            return self._encode_objects(arr)
        flat, lengths = packed
        wrong = np.flatnonzero(lengths != self.length)
        head = int(wrong[0]) if wrong.size else arr.size  # the items before the first bad length
        digits = self._table[flat[: head * self.length]].reshape(head, self.length)
        self._check_symbols(digits, flat, 0)  # so an error names the first offending user
        self._check_length(lengths, 0)
        return self._accumulate(digits)

    def _accumulate(self, digits: np.ndarray) -> np.ndarray:
        codes = np.zeros(digits.shape[0], dtype=np.int64)
        for j in range(self.length):  # a loop over positions, not users
            codes = codes * len(self.alphabet) + digits[:, j]
        return codes

    def _check_length(self, lengths: np.ndarray, offset: int) -> None:
        wrong = np.flatnonzero(lengths != self.length)
        if wrong.size:
            i = int(wrong[0])
            raise InvalidInputError(
                f"items[{i + offset}]: has {int(lengths[i])} characters, the positional code "
                f"takes exactly length = {self.length}"
            )

    def _check_symbols(self, digits: np.ndarray, flat: np.ndarray, offset: int) -> None:
        bad = np.flatnonzero((digits < 0).any(axis=1))
        if bad.size:
            i = int(bad[0])
            j = int(np.argmax(digits[i] < 0))
            symbol = chr(int(flat[i * self.length + j]))
            raise InvalidInputError(
                f"items[{i + offset}]: holds {symbol!r} at position {j}, not in the alphabet "
                f"{self.alphabet!r}"
            )

    def _encode_objects(self, arr: np.ndarray) -> np.ndarray:
        """:meth:`encode` item by distinct item, in the order of their first user (so an error
        names the first offending user)."""
        labels, uniques = _factorize_items(arr)
        first = np.full(len(uniques), labels.size, dtype=np.int64)
        np.minimum.at(first, labels, np.arange(labels.size))
        digits = np.empty((len(uniques), self.length), dtype=np.int64)
        for u in np.argsort(first, kind="stable").tolist():
            i, item = int(first[u]), arr[first[u]]
            if isinstance(item, bytes | bytearray | memoryview):
                try:
                    item = bytes(item).decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidInputError(f"items[{i}]: bytes that are not UTF-8") from None
            if not isinstance(item, str):
                raise InvalidTypeError(
                    f"items[{i}]: expected str or bytes, got {type(item).__name__}"
                )
            self._check_length(np.array([len(item)]), i)
            for j, c in enumerate(item):
                if c not in self._index:
                    raise InvalidInputError(
                        f"items[{i}]: holds {c!r} at position {j}, not in the alphabet "
                        f"{self.alphabet!r}"
                    )
                digits[u, j] = self._index[c]
        return self._accumulate(digits)[labels]

    def decode(self, codes: Any, candidates: Sequence[Any] | None = None) -> list[Any]:
        """The item behind each code (a str; None for a code ``>= |A|^L``, which no item has).

        No dictionary is needed: the digits of the code in base ``|A|`` are the item's symbols.
        With ``candidates``, as :meth:`ItemEncoder.decode`: the first candidate equal to the
        item (bytes read as UTF-8), None where none is.
        """
        codes = np.asarray(codes, dtype=np.int64).ravel()
        valid = (codes >= 0) & (codes < self.size)
        rest = np.where(valid, codes, 0)
        base = len(self.alphabet)
        digits = np.empty((codes.size, self.length), dtype=np.int64)
        for j in range(self.length - 1, -1, -1):
            rest, digits[:, j] = np.divmod(rest, base)
        if self._table is not None:
            symbols = np.frombuffer(self.alphabet.encode("ascii"), dtype=np.uint8)
            text = symbols[digits].view(f"S{self.length}").ravel().astype(f"U{self.length}")
            names = text.tolist()
        else:
            names = ["".join(self.alphabet[d] for d in row) for row in digits.tolist()]
        names = [x if ok else None for x, ok in zip(names, valid.tolist(), strict=True)]
        if candidates is None:
            return names
        wanted = set(names) - {None}
        holder: dict[str, Any] = {}
        for c in candidates:  # the candidates as they come, the first holder of each name
            key = bytes(c).decode("utf-8", "replace") if isinstance(c, bytes | bytearray) else c
            if isinstance(key, str) and key in wanted and key not in holder:
                holder[key] = c
        return [holder.get(x) if x is not None else None for x in names]


def make_encoder(
    encoder: ItemEncoder | PositionalEncoder | None,
    bits: int | None,
    key: bytes | str | None,
    max_length: int | None,
) -> ItemEncoder | PositionalEncoder:
    """PEM's and TreeHist's code: ``encoder`` as given, or the keyed hash of ``bits`` (24),
    ``key`` and ``max_length`` (64); both at once is refused (the encoder fixes the code)."""
    if encoder is None:
        return ItemEncoder(DEFAULT_BITS if bits is None else bits,
                           DEFAULT_KEY if key is None else key,
                           DEFAULT_MAX_LENGTH if max_length is None else max_length)  # fmt: skip
    if not isinstance(encoder, ItemEncoder | PositionalEncoder):
        raise InvalidTypeError(
            f"encoder: expected an ItemEncoder or PositionalEncoder, got {type(encoder).__name__}"
        )
    given = [
        n for n, v in (("bits", bits), ("key", key), ("max_length", max_length)) if v is not None
    ]
    if given:
        raise InvalidInputError(
            f"encoder: fixes the code; give either encoder or {', '.join(given)}, not both"
        )
    return encoder
