"""Keccak-256, the hash Ethereum uses (and the escrow's receipts), in pure Python.

Python's ``hashlib.sha3_256`` is NOT it: SHA-3 pads the message with ``0x06``, the original Keccak that Ethereum
adopted before SHA-3 was standardised pads with ``0x01``; the permutation is the same. Debian's Python has no
Keccak (OpenSSL 3.0 exposes only SHA-3 and KMAC through hashlib; ``pycryptodome``, ``eth-hash`` and ``pysha3`` are
not installed and no package index is reachable), so the permutation is written here, from the Keccak reference
(FIPS 202, section 3). Its tests (tests/test_keccak.py) hold it to the Keccak team's published Keccak-256 vectors,
and, with SHA-3's padding, to ``hashlib.sha3_256`` on messages of every length around the rate.

It hashes receipts (a few hundred bytes), not bulk data: about a millisecond per 136-byte block.
"""

from typing import List

_MASK = (1 << 64) - 1
#: Round constants of Keccak-f[1600] (FIPS 202, 3.2.5).
_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]  # fmt: skip
#: Rotation offsets r[x][y] (FIPS 202, 3.2.2), indexed [x + 5 * y].
_ROT = [
    0, 1, 62, 28, 27,
    36, 44, 6, 55, 20,
    3, 10, 43, 25, 39,
    41, 45, 15, 21, 8,
    18, 2, 61, 56, 14,
]  # fmt: skip


def _rol(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (64 - shift))) & _MASK if shift else value


def _keccak_f(a: List[int]) -> None:
    """Keccak-f[1600] on the 25 lanes ``a`` (lane (x, y) at ``a[x + 5 * y]``), in place."""
    for rc in _RC:
        # theta
        c = [a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        for i in range(25):
            a[i] ^= d[i % 5]
        # rho and pi: B[y, 2x + 3y] = rot(A[x, y], r[x, y])
        b = [0] * 25
        for x in range(5):
            for y in range(5):
                b[y + 5 * ((2 * x + 3 * y) % 5)] = _rol(a[x + 5 * y], _ROT[x + 5 * y])
        # chi
        for y in range(0, 25, 5):
            row = b[y : y + 5]
            for x in range(5):
                a[y + x] = row[x] ^ ((~row[(x + 1) % 5]) & row[(x + 2) % 5])
        # iota
        a[0] ^= rc


def _sponge(data: bytes, rate_bytes: int, pad: int, out_bytes: int) -> bytes:
    """The sponge over Keccak-f[1600] with the multi-rate padding whose first byte is ``pad`` (0x01 Keccak, 0x06 SHA-3)."""
    padded = bytearray(data)
    padded.append(pad)
    padded.extend(b"\x00" * (-len(padded) % rate_bytes))
    padded[-1] |= 0x80
    state = [0] * 25
    for offset in range(0, len(padded), rate_bytes):
        block = padded[offset : offset + rate_bytes]
        for i in range(rate_bytes // 8):
            state[i] ^= int.from_bytes(block[8 * i : 8 * i + 8], "little")
        _keccak_f(state)
    out = b"".join(lane.to_bytes(8, "little") for lane in state[: rate_bytes // 8])
    return out[:out_bytes]


def keccak256(data: bytes) -> bytes:
    """Ethereum's keccak256 of ``data``: 32 bytes."""
    return _sponge(bytes(data), 136, 0x01, 32)


def _sha3_256(data: bytes) -> bytes:
    """SHA3-256 through the same permutation: only to test it against hashlib.sha3_256."""
    return _sponge(bytes(data), 136, 0x06, 32)
