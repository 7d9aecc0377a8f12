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
