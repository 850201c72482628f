"""Triton's Philox random numbers written from the Random123 paper (Salmon et al., 2011) with Python integers.

The tests of the bridge's `tl.rand`, `tl.randn` and `tl.randint`, and of the
Triton tutorial that drops out with them, compare against this: Philox4x32
with 10 rounds over Triton's counter (offset low word, offset high word,
0, 0) and key (seed low word, seed high word); the first word is the
`randint`; read as an int32, complemented when negative and scaled below 1
it is the `rand`; Box-Muller over the first two words is the `randn`.
"""

from __future__ import annotations

import numpy as np

MASK32 = 0xFFFF_FFFF

# Random123's kat_vectors, philox4x32 with 10 rounds: counter (4 words), key (2 words), result (4 words).
PHILOX_KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox4x32_10(counter, key):
    """Philox4x32 with 10 rounds (Random123): two 32x32->64 multiplies per round, the key bumped by Weyl steps."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_ in range(10):
        if round_:
            k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return c0, c1, c2, c3


def reference_words(seed: int, offset: int):
    """Triton's counter and key layout: the offset's two words count, the seed's two words key."""
    return philox4x32_10((offset & MASK32, 0, 0, 0), (seed & MASK32, (seed >> 32) & MASK32))  # int32: no high word


def reference_uniform(word: int) -> np.float32:
    """The word read as an int32, complemented when negative, times the largest scale that stays below 1."""
    signed = word - (1 << 32) if word >> 31 else word
    if signed < 0:
        signed = ~signed
    return np.float32(signed) * np.float32(4.6566127342e-10)


def reference_blocks(seed: int, offsets):
    """(randint int32, rand float32, randn float64) for a seed and int32 offsets, as Triton computes them."""
    words = [reference_words(seed, int(offset)) for offset in offsets]
    randint = np.array([w[0] for w in words], dtype=np.uint32).view(np.int32)
    u1 = np.array([reference_uniform(w[0]) for w in words], dtype=np.float32)
    u2 = np.array([reference_uniform(w[1]) for w in words], dtype=np.float32)
    normal = np.sqrt(-2.0 * np.log(np.maximum(1.0e-7, u1.astype(np.float64)))) * np.cos(6.283185307179586 * u2)
    return randint, u1, normal
