"""Correctly rounded ``exp`` and ``log`` for the generators: the same bits on every machine.

numpy's float64 ``exp`` and ``log`` take another code path on each processor (on an AVX-512 one,
Intel's SVML kernels, about 1 ulp off on 5% of arguments; elsewhere the C library's, whose variant
with FMA and without differ too), so a generated input computed with them fingerprints differently
from one machine to the next (issue 60: ``giph-net:devices=12,seed=13`` was 5e9d768face9fd76 on
AVX-512 and 0bc67c8c2b8afaac on AVX2). These compute the exact value in Python's software decimal
arithmetic at 60 significant digits (about 199 bits; the hardest binary64 arguments of exp and log
need fewer than 130 bits to round correctly, Lefevre and Muller 2001) and round it once to the
nearest double: the correctly rounded result, which depends on no processor, library or dispatch.
About 0.1 ms a value, for the handful of draws a generator makes, never for bulk arrays.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal

_CTX = Context(prec=60)


def exp(x: float) -> float:
    """e**x correctly rounded to the nearest double (inf on overflow, 0.0 on underflow)."""
    x = float(x)
    if not math.isfinite(x):
        return math.exp(x)  # inf, 0.0 or nan: exact in every library
    if x > 710.0:
        return math.inf
    if x < -746.0:
        return 0.0
    return float(Decimal(x).exp(_CTX))


def log(x: float) -> float:
    """The natural logarithm of a positive finite ``x``, correctly rounded to the nearest double."""
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"log of {x!r}: not a positive finite number")
    return float(Decimal(x).ln(_CTX))
