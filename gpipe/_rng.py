"""Counter-based random numbers, the CPU twin of ``kernels/rng.cuh``.

Every draw is a pure function of ``(seed, id, step, draw)``: ``id`` is the
stream's id (a walk's walk id, a sampled instance, an R-MAT edge index),
``step`` and ``draw`` count the draws within it. Nothing depends on how many
workers, partitions or GPUs run the work, nor on the device: the CUDA header
computes the same bits.

    key(seed)                 = mix64(seed + GOLDEN)                  # SplitMix64's finaliser, a bijection
    bits(key, id, step, draw) = philox4x32_10(counter=(draw, step, id & 0xffffffff, id >> 32),
                                              key=(key & 0xffffffff, key >> 32))  # words w0..w3
                              = (w0 | w1 << 32, w2 | w3 << 32)        # a block of two 64-bit words
    unit(block)               = (block[0] >> 11) * 2**-53             # uniform in [0, 1)
    below(block, n)           = hi64(w * n), w = block[1] if block[0] is rejected else block[0]

Philox-4x32-10 (Salmon et al., SC'11; the generator of cuRAND and NumPy) is a
bijection of its 128-bit counter for each key, so no two (id, step, draw) of a
run share a block: streams never overlap, however many there are. ``step`` and
``draw`` must be below 2**32.

``below`` is Lemire's multiply-shift on the full 64x64-bit product: the high
word is the draw, and the block's first word is rejected when the low word
falls below ``2**64 mod n``, which leaves every value in [0, n) exactly
``floor(2**64 / n)`` first words. A rejected first word (probability below
``n / 2**64``) is replaced by the second, unchecked: each value's probability
is then within ``n / 2**128`` of ``1 / n``, a relative bias below ``n**2 / 2**128``
(``3e-25`` at degree 1e7, ``2**-64`` at ``n = 2**32``) with one Philox block per draw.
"""

from __future__ import annotations

import numpy as np

from .backend import cpu_kernel, prange
from .kernels import Arg, Kernel

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = np.uint64(0x9E3779B9)
_PHILOX_W1 = np.uint64(0xBB67AE85)
_LOW32 = np.uint64(0xFFFFFFFF)
_S30, _S27, _S31, _S32, _S11 = (np.uint64(s) for s in (30, 27, 31, 32, 11))
_INV53 = 1.0 / 9007199254740992.0


@cpu_kernel()
def mix64(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@cpu_kernel()
def key(seed):
    return mix64(np.uint64(seed) + GOLDEN)


@cpu_kernel()
def philox(counter0, counter1, counter2, counter3, key0, key1):
    """Philox-4x32-10: the four 32-bit output words (held in uint64s) of a 128-bit counter under a 64-bit key."""
    c0, c1, c2, c3 = np.uint64(counter0), np.uint64(counter1), np.uint64(counter2), np.uint64(counter3)
    k0, k1 = np.uint64(key0), np.uint64(key1)
    for _ in range(10):
        p0 = _PHILOX_M0 * c0
        p1 = _PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _LOW32, (p0 >> _S32) ^ c3 ^ k1, p0 & _LOW32
        k0 = (k0 + _PHILOX_W0) & _LOW32
        k1 = (k1 + _PHILOX_W1) & _LOW32
    return c0, c1, c2, c3


@cpu_kernel()
def bits(run_key, stream_id, step, draw):
    """The block ``(first, second)`` of draw ``draw`` at ``step`` of stream ``stream_id``."""
    k = np.uint64(run_key)
    i = np.uint64(stream_id)
    w0, w1, w2, w3 = philox(np.uint64(draw) & _LOW32, np.uint64(step) & _LOW32, i & _LOW32, i >> _S32,
                            k & _LOW32, k >> _S32)
    return w0 | (w1 << _S32), w2 | (w3 << _S32)


def _mul_high_of(a, b):
    """The high 64-bit word of the 128-bit product ``a * b``, from 32-bit limbs (numba has no uint128): of uint64
    scalars compiled (``_mul_high``), of numpy or cupy uint64 arrays as it is (``below_array``)."""
    a0, a1, b0, b1 = a & _LOW32, a >> _S32, b & _LOW32, b >> _S32
    cross0 = a1 * b0
    cross1 = a0 * b1
    carry = ((a0 * b0) >> _S32) + (cross0 & _LOW32) + (cross1 & _LOW32)
    return a1 * b1 + (cross0 >> _S32) + (cross1 >> _S32) + (carry >> _S32)


_mul_high = cpu_kernel()(_mul_high_of)


@cpu_kernel()
def below(block, n):
    """Uniform in [0, n) for 0 < n < 2**63 (see the module docstring for the bias bound)."""
    m = np.uint64(n)
    low = block[0] * m  # wraps: the low word of the product
    if low < m and low < (np.uint64(0) - m) % m:  # (2**64 - n) mod n: the rejected first words
        return np.int64(_mul_high(block[1], m))
    return np.int64(_mul_high(block[0], m))


@cpu_kernel()
def unit(block):
    return np.float64(block[0] >> _S11) * _INV53


@cpu_kernel(parallel=True)
def _draws_cpu(run_key, stream_ids, n, step, draw, out):
    for i in prange(n):
        out[i, 0], out[i, 1] = bits(run_key, stream_ids[i], step, draw[i])


def draws(x, run_key, stream_ids, step: int, draw):
    """``bits`` for an array of stream ids at one step: blocks as a ``(n, 2)`` uint64 array of ``x`` (numpy or
    cupy; ``kernels/rng.cu`` on the GPU, so the same bits as every kernel).

    ``draw`` is one draw index for all, or an array of them (one per stream id).
    """
    n = stream_ids.shape[0]
    ids = x.ascontiguousarray(stream_ids, dtype=x.int64)
    draw = x.full(n, draw, x.int64) if np.isscalar(draw) else x.ascontiguousarray(draw, dtype=x.int64)
    out = x.empty((n, 2), x.uint64)
    DRAWS.launch(run_key=run_key, stream_ids=ids, n=n, step=step, draw=draw, out=out)
    return out


DRAWS = Kernel("rng.cu", "gp_draws", twin=_draws_cpu, items="n", args=(
    Arg("run_key", "u64"), Arg("stream_ids", "i64[n]"), Arg("n", "i64"), Arg("step", "i64"), Arg("draw", "i64[n]"),
    Arg("out", "u64[n,2]", out=True, note="blocks")))


def below_array(blocks, n):
    """``below`` of each block of ``draws`` and each bound of the uint64 array ``n`` (numpy or cupy, its shape)."""
    low = blocks[:, 0] * n  # wraps: the low words of the products
    rejected = (low < n) & (low < (0 - n) % n)
    return _mul_high_of(blocks[:, 1] * rejected + blocks[:, 0] * ~rejected, n).astype(np.int64)


def unit_array(blocks):
    """``unit`` of each block of ``draws``."""
    return (blocks[:, 0] >> _S11).astype(np.float64) * _INV53
