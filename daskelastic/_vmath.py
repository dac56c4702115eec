"""``log`` and ``log1p`` that LLVM vectorises inside a numba loop.

numba compiles ``math.log`` to a call of the C library's scalar ``log``, which
stops LLVM from vectorising the loop around it (with PyPI's llvmlite there is
no SVML).  NumPy's ufuncs are vectorised but take one pass over memory each:
the logistic solver's dual values and logits of a round took six passes, one
numba loop calling :func:`log` and :func:`log1p` below takes one (the docs'
*Benchmarks*, *The local solver*; ``benchmarks/bench_logistic_logs.py``).
``tests/test_vmath.py`` checks the two functions against ``long double``.

:func:`log` is fdlibm's ``e_log.c`` without its special cases: ``x`` must be
a positive normal number.  Its error is below 1 ulp (:func:`log1p`'s, with
the correction of fdlibm's ``s_log1p.c``, below 1.5).  The exponent and
mantissa are taken from the bits of ``x`` (:func:`bits_of`,
:func:`float_of`), which LLVM turns into vector instructions.  With
``NUMBA_DISABLE_JIT=1`` the same code runs in Python (NumPy views for the
bits).

fdlibm's notice, for the algorithm and coefficients::

    Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.

    Developed at SunSoft, a Sun Microsystems, Inc. business.
    Permission to use, copy, modify, and distribute this
    software is freely granted, provided that this notice
    is preserved.
"""

import numpy as np
from numba import njit, types
from numba.core.config import DISABLE_JIT
from numba.extending import intrinsic

#: The smallest positive normal float64; :func:`log` needs ``x ≥`` this.
TINY = 2.2250738585072014e-308

# fdlibm's coefficients of log(1 + f) = 2s + s·R(s²), s = f/(2 + f), and ln 2
# split so that k·LN2_HI is exact for the exponents of float64
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10

_MANTISSA = 0x000FFFFFFFFFFFFF
_ONE_BITS = 0x3FF << 52
# added to the mantissa, carries into bit 52 when 1.mantissa ≥ √2
_SQRT2_CARRY = 0x95F64 << 32
_BIT52 = 1 << 52


if DISABLE_JIT:   # pragma: no cover - exercised by the nox "nojit" session
    def bits_of(x):
        """The bits of the float64 ``x`` as an int64."""
        return np.array(x, dtype=np.float64).view(np.int64)[()]

    def float_of(i):
        """The float64 whose bits are the int64 ``i``."""
        return np.array(i, dtype=np.int64).view(np.float64)[()]
else:
    def _bitcast(to):
        """An intrinsic's code: its argument's bits read as a ``to``."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(to))
        return codegen

    @intrinsic
    def bits_of(typingctx, x):
        """The bits of the float64 ``x`` as an int64."""
        if x == types.float64:
            return types.int64(types.float64), _bitcast(types.int64)
        return None

    @intrinsic
    def float_of(typingctx, i):
        """The float64 whose bits are the int64 ``i``."""
        if i == types.int64:
            return types.float64(types.int64), _bitcast(types.float64)
        return None


@njit(cache=True, nogil=True, inline="always")
def _split(x):
    """``(k, f)`` with ``x = 2^k·(1 + f)``, ``1 + f`` from about ``√2/2`` to ``√2`` (fdlibm).

    ``x`` positive normal; the mantissa is halved from ``1.41421127`` on,
    slightly below ``√2``.
    """
    ix = bits_of(x)
    mantissa = ix & _MANTISSA
    carry = (mantissa + _SQRT2_CARRY) & _BIT52   # 1.mantissa ≥ √2: halve it
    f = float_of(mantissa | (carry ^ _ONE_BITS)) - 1.0
    return (ix >> 52) - 1023 + (carry >> 52), f


@njit(cache=True, nogil=True, inline="always")
def _log_of_split(k, f):
    """``k·ln 2 + log(1 + f)`` for ``1 + f`` in :func:`_split`'s range (fdlibm)."""
    dk = float(k)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    r = t2 + t1
    hfsq = 0.5 * f * f
    return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)


@njit(cache=True, nogil=True, inline="always")
def log(x):
    """Natural log of a positive normal ``x`` (error below 1 ulp), vectorisable.

    No checks: 0, subnormals, negative numbers, infinities and NaN give
    meaningless results.
    """
    k, f = _split(x)
    return _log_of_split(k, f)


@njit(cache=True, nogil=True, inline="always")
def log1p(v):
    """``log(1 + v)`` for ``v > -1`` with ``1 + v`` normal (rounded up to ``TINY``), vectorisable.

    Where ``1 + v`` lies in the series' range (``k = 0``: about ``√2/2`` to
    ``√2``) the series takes ``f = v`` itself, exact; elsewhere, as fdlibm's
    ``s_log1p.c``, the log of the rounded ``u = 1 + v`` is corrected by
    ``(v − (u − 1))/u`` (its rounding error, exactly for ``|v| ≤ 1``).  Error
    below 1.5 ulps (``tests/test_vmath.py``).
    """
    u = max(1.0 + v, TINY)
    k, f = _split(u)
    y = _log_of_split(k, v if k == 0 else f)
    return y if k == 0 else y + (v - (u - 1.0)) / u
