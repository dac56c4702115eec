"""A guard around ``ast.parse`` for the CPython releases whose AST conversion races.

CPython 3.11.0–3.11.7 and 3.12.0–3.12.1 count the depth of the conversion of a
parsed tree to Python objects in one counter per interpreter, not per thread
(python/cpython#106905, fixed in 3.11.8 and 3.12.2).  When Python code runs in the
middle of that conversion (a garbage collection's callbacks and finalizers, as
distributed's in-process workers install) and another thread, or that code
itself, parses too, the counter no longer balances and ``ast.parse`` raises
``SystemError: AST constructor recursion depth mismatch``.  pytest parses while
it rewrites the test modules' assertions and while it formats a report; on
3.11.7 this failed a whole CI run with an ``INTERNALERROR`` (twice in about
thirty runs).

:func:`install` replaces ``ast.parse`` on those releases with a version that
turns the garbage collector off while it parses (so that no Python code runs
inside the conversion: no finalizer, no switch to another thread; on again when
the last parse under way in any thread ends) and parses again if the error
still comes (from a parse that does not go through ``ast.parse``).  Elsewhere
it changes nothing.
"""

import ast
import functools
import gc
import sys
import threading

#: Releases with the race (python/cpython#106905).
AFFECTED = (3, 11) <= sys.version_info[:3] < (3, 11, 8) or (
    (3, 12) <= sys.version_info[:3] < (3, 12, 2))

_MISMATCH = "AST constructor recursion depth mismatch"

#: Parses of one call at most (the first and its repetitions).
ATTEMPTS = 3

# Parses under way (in any thread) and whether the collector was on before the
# first of them: the last one to end turns it back on.  Each parse recording
# the state it found would not do: a parse starting while another has the
# collector off would find it off, and whichever ended last could leave it off
# for good, or turn it on while the other still parses.
_lock = threading.Lock()
_parsing = 0
_was_enabled = False


def _collector_off():
    global _parsing, _was_enabled
    with _lock:
        if _parsing == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _parsing += 1


def _collector_back():
    global _parsing
    with _lock:
        _parsing -= 1
        if _parsing == 0 and _was_enabled:
            gc.enable()


def guarded(parse):
    """``parse`` (``ast.parse``) without the collector running, repeated on the race's error."""
    @functools.wraps(parse)
    def parse_guarded(*args, **kwargs):
        for attempt in range(ATTEMPTS):
            _collector_off()
            try:
                return parse(*args, **kwargs)
            except SystemError as e:
                if _MISMATCH not in str(e) or attempt == ATTEMPTS - 1:
                    raise
            finally:
                _collector_back()

    parse_guarded.__wrapped_by_daskelastic__ = True
    return parse_guarded


def install():
    """Put :func:`guarded` in place of ``ast.parse`` on affected releases; ``True`` if it did."""
    if not AFFECTED:
        return False
    if not getattr(ast.parse, "__wrapped_by_daskelastic__", False):
        ast.parse = guarded(ast.parse)
    return True
