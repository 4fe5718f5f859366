"""The pure-Python Keccak-256 (skill_gateway/_keccak.py) against published vectors and hashlib's SHA-3."""

import hashlib
import random

import pytest

from skill_gateway._keccak import _sha3_256, keccak256

# Keccak-256 (the original Keccak padding, as Ethereum uses it). The first three are the Keccak team's
# ShortMsgKAT_256 (Len = 0, 8 and 16 bits); the others the usual published ones. viem's keccak256 gives the same.
VECTORS = [
    (b"", "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"),
    (bytes.fromhex("cc"), "eead6dbfc7340a56caedc044696a168870549a6a7f6f56961e84a54bd9970b8a"),
    (bytes.fromhex("41fb"), "a8eaceda4d47b3281a795ad9e1ea2122b407baf9aabcb9e18b5717b7873537d2"),
    (b"abc", "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"),
    (b"The quick brown fox jumps over the lazy dog", "4d741b6f1eb29cb2a9b9911c82f56fa8d73b04959d3d9d222895df6c0b28aa15"),
    (
        b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
        "45d3b367a6904e6e8d502ee04999a7c27647f91fa845d456525fd352ae3d7371",
    ),
    # Two blocks (the rate is 136 bytes).
    (b"a" * 200, "96ea54061def936c4be90b518992fdc6f12f535068a256229aca54267b4d084d"),
]


@pytest.mark.parametrize("message, digest", VECTORS)
def test_keccak256_matches_the_published_vectors(message: bytes, digest: str) -> None:
    assert keccak256(message).hex() == digest


def test_keccak256_is_not_sha3_256() -> None:
    # The trap the module exists for: hashlib's sha3_256 pads differently.
    assert keccak256(b"").hex() != hashlib.sha3_256(b"").hexdigest()


def test_the_same_permutation_with_sha3_padding_is_hashlib_sha3_256_at_every_length_around_the_rate() -> None:
    rng = random.Random(27)
    for length in list(range(0, 300)) + [407, 408, 409, 543, 544, 545, 1000]:
        message = bytes(rng.getrandbits(8) for _ in range(length))
        assert _sha3_256(message) == hashlib.sha3_256(message).digest(), length


def test_the_escrow_function_selector() -> None:
    # receiptsRoots(uint256), as solc and viem compute it.
    assert keccak256(b"receiptsRoots(uint256)")[:4].hex() == "a491340e"
