"""ItemEncoder: keyed-hash codes of str / bytes items, bounded length, decoding by candidates."""

import hashlib

import numpy as np
import pytest

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters import ItemEncoder


def test_codes_are_the_keyed_blake2b_prefix():
    enc = ItemEncoder(bits=20, key=b"k1")
    digest = hashlib.blake2b(b"apple", key=b"k1", digest_size=8).digest()
    expected = int.from_bytes(digest, "big") >> 44
    codes = enc.encode(["apple", b"apple", "pear", "apple"])
    assert codes.dtype == np.int64
    assert codes[0] == codes[1] == codes[3] == expected  # str is its UTF-8 bytes
    assert 0 <= codes[2] < 2**20 and codes[2] != expected


def test_the_key_changes_the_codes_and_the_fingerprint():
    items = [f"w{i}" for i in range(50)]
    a, b = ItemEncoder(16, key="one"), ItemEncoder(16, key="two")
    assert np.mean(a.encode(items) == b.encode(items)) < 0.1
    assert a.fingerprint != b.fingerprint != ItemEncoder(17, key="two").fingerprint
    assert a.fingerprint == ItemEncoder(16, key=b"one").fingerprint


def test_too_long_item_names_its_index_and_length():
    enc = ItemEncoder(bits=16, max_length=4)
    with pytest.raises(InvalidInputError, match=r"items\[2\]: is 6 bytes long .*max_length = 4"):
        enc.encode(["ab", "abcd", "abcdef", "abcdef"])
    with pytest.raises(InvalidInputError, match=r"items\[0\]: is 6 bytes"):
        enc.encode(["\u00e9\u00e9\u00e9"])  # 3 characters, 6 bytes in UTF-8


def test_bad_items_and_parameters():
    enc = ItemEncoder(bits=16)
    with pytest.raises(InvalidTypeError, match=r"items\[1\]: expected str or bytes, got int"):
        enc.encode(["a", 3])
    with pytest.raises(InvalidInputError, match="items: is empty"):
        enc.encode([])
    with pytest.raises(InvalidTypeError, match="one item"):
        enc.encode("abc")
    with pytest.raises(InvalidInputError, match=r"bits: must lie in 1\.\.30"):
        ItemEncoder(bits=31)
    with pytest.raises(InvalidInputError, match="key: BLAKE2b takes at most 64 bytes"):
        ItemEncoder(key=b"x" * 65)


def test_decode_recovers_candidates_only():
    enc = ItemEncoder(bits=24, key="s")
    codes = enc.encode(["cat", "dog", "unknown"])
    assert enc.decode(codes, ["dog", "cat", "emu"]) == ["cat", "dog", None]
    assert enc.decode(codes, []) == [None, None, None]


@pytest.mark.parametrize("key", [b"", b"k", b"bayesldp-pem", bytes(range(64))])
def test_compiled_blake2b_equals_hashlib(key):
    """Every message length around the 128-byte block (0, 127, 128, 129, 256, ...) and keys of
    0..64 bytes: the compiled codes are hashlib's digest prefix, for every code width."""
    from bayesldp.heavy_hitters._blake2b import keyed_codes

    rng = np.random.default_rng(len(key))
    lengths = [0, 1, 63, 64, 127, 128, 129, 255, 256, 257, 1000, *rng.integers(0, 300, 40)]
    data = [rng.bytes(int(n)) for n in lengths]
    full = [int.from_bytes(hashlib.blake2b(d, key=key, digest_size=8).digest(), "big")
            for d in data]  # fmt: skip
    for bits in (1, 24, 30, 63):
        assert keyed_codes(data, key, bits).tolist() == [h >> (64 - bits) for h in full]


def test_encode_mixed_str_and_bytes_and_non_ascii():
    """str (UTF-8, non-ASCII too) and bytes items, repeated: the keyed BLAKE2b of their bytes."""
    enc = ItemEncoder(bits=30, key="mix", max_length=16)
    items = ["caf\u00e9", b"caf\xc3\xa9", "\u65e5\u672c", b"\x00\xff", "", "a", "caf\u00e9"]

    def code(item):
        data = item.encode("utf-8") if isinstance(item, str) else item
        return int.from_bytes(hashlib.blake2b(data, key=b"mix", digest_size=8).digest(), "big")

    assert enc.encode(items).tolist() == [code(x) >> 34 for x in items]
    assert enc.encode(np.array(items[::2], dtype=object)).tolist() == [
        code(x) >> 34 for x in items[::2]
    ]


def test_bytearray_and_memoryview_items_are_their_bytes_and_unhashable_others_refused():
    """A bytearray or memoryview item is read whole as its bytes (numpy would unpack it into a
    row and pandas cannot hash it); a list item is refused naming its index."""
    enc = ItemEncoder(bits=24, key="mix")
    want = enc.encode([b"abc", b"de", b"abc"])
    np.testing.assert_array_equal(enc.encode([bytearray(b"abc"), memoryview(b"de"), b"abc"]), want)
    with pytest.raises(InvalidTypeError, match=r"items\[1\]: expected str or bytes, got list"):
        enc.encode([b"abc", [1, 2]])


def test_decode_takes_the_first_candidate_of_a_shared_code():
    enc = ItemEncoder(bits=1, key="s")  # two codes: candidates share them
    cand = [f"w{i}" for i in range(20)]
    codes = enc.encode(cand)
    first = {int(c): w for w, c in reversed(list(zip(cand, codes, strict=True)))}
    assert enc.decode([0, 1, 1], cand) == [first.get(0), first.get(1), first.get(1)]


def test_decode_refuses_bad_candidates_in_one_line():
    enc = ItemEncoder(bits=16, max_length=4)
    codes = enc.encode(["ab"])
    with pytest.raises(InvalidTypeError, match=r"items\[1\]: expected str or bytes, got int$"):
        enc.decode(codes, ["ab", 7])
    with pytest.raises(InvalidInputError, match=r"items\[2\]: is 5 bytes long"):
        enc.decode(codes, ["ab", b"cd", "abcde"])
    assert enc.decode(codes, ["x", "ab", "ab", b"ab"]) == ["ab"]


# ------------------------------------------------------------------ grouping rule
def _hashlib_code(item, key, bits):
    data = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    return int.from_bytes(hashlib.blake2b(data, key=key, digest_size=8).digest(), "big") >> (
        64 - bits
    )


@pytest.mark.parametrize(
    "items",
    [
        ["b", "a", "", "b", "ab", "a", "", "ba", "abc", "ab"],  # ASCII str: compiled grouping
        ["", ""],
        ["only"],
        ["a\x80", "a", "\x80", "a\x80"],  # the packing's separator inside an item: not ASCII
        ["caf\u00e9", "cafe", "caf\u00e9", "\u00ff"],  # Latin-1, not ASCII
        ["\u65e5\u672c", "", "\u65e5\u672c", "x"],  # beyond Latin-1
        [b"ab", "ab", b"", "", b"\x80\xff", "ab"],  # mixed str and bytes
    ],
)
def test_both_grouping_branches_give_hashlib_codes_and_first_seen_labels(items):
    """Each branch of the rule (all ASCII str: packed and grouped compiled; else pandas):
    hashlib's codes per user, labels numbered by first occurrence of the item's bytes."""
    import pandas as pd

    enc = ItemEncoder(bits=30, key="rule", max_length=8)
    labels, flat, lengths, codes = enc._encode_distinct(items)
    assert enc.encode(items).tolist() == [_hashlib_code(x, b"rule", 30) for x in items]
    assert codes[labels].tolist() == [_hashlib_code(x, b"rule", 30) for x in items]
    if all(isinstance(x, str) for x in items) or all(isinstance(x, bytes) for x in items):
        assert labels.tolist() == pd.factorize(np.array(items, dtype=object))[0].tolist()
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    distinct = [flat[offsets[u] : offsets[u + 1]].tobytes() for u in range(lengths.size)]
    as_bytes = [x.encode("utf-8") if isinstance(x, str) else x for x in items]
    assert [distinct[u] for u in labels] == as_bytes


def test_pack_ascii_takes_only_ascii_str():
    from bayesldp.heavy_hitters.encoding import _pack_ascii

    flat, lengths = _pack_ascii(["ab", "", "c", ""])
    assert flat.tobytes() == b"abc" and lengths.tolist() == [2, 0, 1, 0]
    assert _pack_ascii([""])[1].tolist() == [0]
    for items in (["a", "\x80"], ["\u00e9"], ["\u65e5"], ["a", b"b"], [b"a"], ["a", 3], []):
        assert _pack_ascii(items) is None


def test_factorize_packed_groups_equal_bytes_in_first_seen_order():
    """Many short strings, prefixes of one another and empty ones, in a table that fills up:
    the same labels as pandas, the first user of each distinct item, its bytes."""
    import pandas as pd

    from bayesldp.heavy_hitters._blake2b import pack
    from bayesldp.heavy_hitters._factorize import factorize_packed

    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 5, 3000)
    data = [bytes(rng.integers(0, 3, size=int(n)).astype(np.uint8)) for n in sizes]
    labels, first, flat, lengths = factorize_packed(*pack(data))
    expected, uniques = pd.factorize(np.array(data, dtype=object))
    assert labels.tolist() == expected.tolist()
    assert [data[i] for i in first] == list(uniques)
    assert flat.tobytes() == b"".join(uniques) and lengths.tolist() == [len(u) for u in uniques]


def test_fast_branch_errors_name_the_first_offending_user():
    enc = ItemEncoder(bits=16, max_length=3)
    with pytest.raises(InvalidInputError, match=r"^items\[3\]: is 4 bytes long \(UTF-8\), more "):
        enc.encode(["", "abc", "ab", "abcd", "abcdef"])
    with pytest.raises(InvalidInputError, match=r"^items\[1\]: is 4 bytes long"):
        enc.encode(["a", "\u00e9\u00e9", "abcdef"])  # not ASCII: the pandas branch
    with pytest.raises(InvalidTypeError, match=r"^items\[2\]: expected str or bytes, got float$"):
        enc.encode(["a", "b", 1.5, "c"])
    with pytest.raises(InvalidTypeError, match=r"^items\[1\]: expected str or bytes, got NoneType"):
        enc.encode(["a", None])


def test_decode_looks_up_repeated_unknown_and_no_codes():
    enc = ItemEncoder(bits=24, key="s")
    cand = ["cat", "dog", "emu", "dog", "caf\u00e9", b"\xff"]
    codes = enc.encode(["dog", "zebra", "cat", "dog", "caf\u00e9", b"\xff"])
    assert enc.decode(codes, cand) == ["dog", None, "cat", "dog", "caf\u00e9", b"\xff"]
    assert enc.decode(np.zeros(0, dtype=np.int64), cand) == []
    assert enc.decode(codes[:1], np.array(["x", "dog"], dtype=object)) == ["dog"]
