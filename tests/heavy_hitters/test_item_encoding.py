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
