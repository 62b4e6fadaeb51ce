"""Counter-based random numbers, the CPU twin of ``kernels/rng.cuh``.

Every draw is a pure function of ``(seed, stream, counter)``: a walk's stream
is its walk id (an R-MAT chunk's is its edge index), the counter is
``step << 32 | draw``. Nothing depends on how many workers, partitions or GPUs
run the work, nor on the device: the CUDA header computes the same bits.

    key(seed)            = mix64(seed + GOLDEN)
    stream(key, s)       = mix64(key + s * GOLDEN)
    bits(stream, c)      = mix64(stream + (c + 1) * GOLDEN)       # c = step << 32 | draw
    below(bits, n)       = ((bits >> 32) * n) >> 32          # uniform in [0, n), n < 2**32
    unit(bits)           = (bits >> 11) * 2**-53             # uniform in [0, 1)

``mix64`` is SplitMix64's finaliser (a bijection on 64-bit words).
"""

from __future__ import annotations

import numpy as np

from .backend import cpu_kernel

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32, _S11 = (np.uint64(s) for s in (30, 27, 31, 32, 11))
_ONE = np.uint64(1)
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
def stream(run_key, s):
    return mix64(run_key + np.uint64(s) * GOLDEN)


@cpu_kernel()
def bits(stream_key, step, draw):
    counter = (np.uint64(step) << _S32) | np.uint64(draw)
    return mix64(stream_key + (counter + _ONE) * GOLDEN)


@cpu_kernel()
def below(r, n):
    return np.int64(((r >> _S32) * np.uint64(n)) >> _S32)


@cpu_kernel()
def unit(r):
    return np.float64(r >> _S11) * _INV53


@cpu_kernel()
def draws(seed, streams, step, draw):
    """Raw bits for many streams at one (step, draw): used to check the twins agree."""
    k = key(seed)
    out = np.empty(streams.shape[0], np.uint64)
    for i in range(streams.shape[0]):
        out[i] = bits(stream(k, streams[i]), step, draw)
    return out


def bits_array(x, stream_keys, step: int, draw):
    """``bits`` for an array of stream keys (numpy or cupy, vectorized; the same bits as the kernels).

    ``draw`` is one draw index for all, or an array of them (one per stream key).
    """
    draw = np.uint64(draw) if np.isscalar(draw) else draw.astype(x.uint64)
    counter = (np.uint64(step) << _S32) | draw
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as in the kernels
        return _mix_array(stream_keys.astype(x.uint64) + (counter + _ONE) * GOLDEN)


def stream_array(x, run_key, ids):
    """``stream`` for an array of ids."""
    with np.errstate(over="ignore"):
        return _mix_array(np.uint64(run_key) + ids.astype(x.uint64) * GOLDEN)


def unit_array(bits):
    return (bits >> _S11).astype(np.float64) * _INV53


def _mix_array(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)
