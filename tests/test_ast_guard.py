"""The guard around ``ast.parse`` that the test-suite installs (tests/ast_guard.py)."""

import ast
import difflib
import gc
import random
import threading
import time
from pathlib import Path

import ast_guard
import pytest

_SOURCE = (Path(__file__).parents[1] / "daskelastic" / "losses.py").read_text()

#: ``ast.parse`` without the guard (which conftest installs on affected releases).
_BARE_PARSE = getattr(ast.parse, "__wrapped__", ast.parse)


def _parse_in_threads(parse, n_threads=8, n_parses=10, n_runs=5):
    """Errors of ``parse`` on a module's source in threads, a collection's callback busy.

    The callback runs Python code inside every collection, as distributed's
    in-process workers' do: on the affected releases that is what breaks the
    interpreter's count of the AST conversion's depth.
    """
    def callback(phase, info):
        rng = random.Random(0)
        a = [f"{rng.randint(0, 10)}\n" for _ in range(50)]
        b = [f"{rng.randint(0, 10)}\n" for _ in range(50)]
        list(difflib.unified_diff(a, b))

    errors = []

    def work():
        for _ in range(n_parses):
            try:
                parse(_SOURCE, "source")
            except SystemError as e:
                errors.append(e)

    gc.callbacks.append(callback)
    try:
        for _ in range(n_runs):
            threads = [threading.Thread(target=work) for _ in range(n_threads)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        gc.callbacks.remove(callback)
    return errors


@pytest.mark.skipif(not ast_guard.AFFECTED, reason="this Python's ast.parse has no race")
def test_the_guard_removes_the_race_that_breaks_ast_parse():
    """Where the race exists, the bare ``ast.parse`` fails under it and the guarded one does not."""
    assert getattr(ast.parse, "__wrapped_by_daskelastic__", False), "conftest installs it"
    bare = ast.parse.__wrapped__
    was_enabled = gc.isenabled()
    gc.enable()   # the race needs collections
    try:
        errors = _parse_in_threads(bare)
        assert errors, "the race did not show: the test no longer shows what the guard does"
        assert "recursion depth mismatch" in str(errors[0])
        assert _parse_in_threads(ast.parse) == []
        assert gc.isenabled(), "the guarded parses left the collector off"
        assert ast.dump(ast.parse(_SOURCE)) == ast.dump(bare(_SOURCE))
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_parses_overlapping_in_threads_keep_the_collector_off_until_the_last_ends():
    """Each parse sees the collector off, also when another thread's parse ends first.

    The parses sleep (releasing the GIL) for different times, so that they
    overlap and end in another order than they began.
    """
    seen = []

    def parse(source, *args, **kwargs):
        seen.append(gc.isenabled())
        time.sleep(float(source))
        seen.append(gc.isenabled())
        return source

    guarded = ast_guard.guarded(parse)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        threads = [threading.Thread(target=guarded, args=(f"{0.002 * (5 - k)}",))
                   for k in range(5)]
        for t in threads:
            t.start()
            time.sleep(0.001)
        for t in threads:
            t.join()
        assert len(seen) == 10
        assert not any(seen), "a parse ran with the collector on"
        assert gc.isenabled(), "the collector was left off"
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_the_guard_passes_other_errors_on_and_restores_the_collector():
    calls = []

    def parse(source, *args, **kwargs):
        calls.append(gc.isenabled())
        if source == "mismatch":
            raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")
        if source == "other":
            raise SystemError("something else")
        return _BARE_PARSE(source)

    guarded = ast_guard.guarded(parse)
    was_enabled = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            calls.clear()
            assert isinstance(guarded("x = 1"), ast.Module)
            assert calls == [False]   # parsed with the collector off
            assert gc.isenabled() is enabled
            with pytest.raises(SyntaxError):
                guarded("x = ")
            assert gc.isenabled() is enabled
            calls.clear()
            with pytest.raises(SystemError, match="something else"):
                guarded("other")
            assert calls == [False]   # not repeated
            calls.clear()
            with pytest.raises(SystemError, match="mismatch"):
                guarded("mismatch")
            assert len(calls) == ast_guard.ATTEMPTS   # repeated, then passed on
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was_enabled else gc.disable)()
