"""Where numba keeps daskelastic's compiled kernels, and the notice while it compiles them.

numba caches a ``cache=True`` function in a ``__pycache__`` folder beside its
source when that folder is writable (numba's docs, *Notes on Caching* and the
``NUMBA_CACHE_DIR`` entry of *Environment variables*).  For an installed
package that is ``site-packages/daskelastic/``: files pip does not know, which
outlive an uninstall and leave a folder that Python then imports as a
namespace package, shadowing a later editable install.  So daskelastic's
kernels are cached in the user's cache directory instead
(:func:`kernel_cache_dir`), one folder per version of the package's sources:
numba checks a cached kernel against its own file only, and a kernel that
inlines a step from another file would otherwise load stale after an upgrade.
An explicit ``NUMBA_CACHE_DIR`` still wins, as it does in numba.

Importing this module calls :func:`install`; ``daskelastic/__init__.py``
imports it before any kernel is defined, in every process that imports
daskelastic (Dask workers unpickling a round's task included), so the driver
and its workers share one cache.
"""

import hashlib
import os
import sys
import threading
import time
from pathlib import Path

from numba.core import caching, config, event

__all__ = ["kernel_cache_dir", "install"]

#: The package's folder: the kernels of the files below it are cached here.
PACKAGE_DIR = Path(__file__).resolve().parent

_NOTICE = ("daskelastic: compiling its numba kernels for this machine, once (the first fit "
           "takes longer); cached in {where}")


def _user_cache_root():
    """The user's cache directory of the platform (where ``platformdirs`` would say)."""
    if sys.platform == "win32":
        root = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Caches"
    else:   # the XDG Base Directory specification
        root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root)


def _sources_digest():
    """A digest of the package's Python sources (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


_DIGEST = None


def kernel_cache_dir():
    """The folder numba caches daskelastic's compiled kernels in.

    ``NUMBA_CACHE_DIR`` when it is set (numba then caches every function
    there); otherwise ``daskelastic/numba/<digest of the sources>`` in the
    user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
    ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows).  The
    folder may be deleted at any time: numba compiles what is missing.

    Returns
    -------
    pathlib.Path
        The folder (it may not exist yet).

    Examples
    --------
    >>> from daskelastic._kernel_cache import PACKAGE_DIR, kernel_cache_dir
    >>> kernel_cache_dir().is_relative_to(PACKAGE_DIR)
    False
    """
    global _DIGEST
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR)
    if _DIGEST is None:
        _DIGEST = _sources_digest()
    return _user_cache_root() / "daskelastic" / "numba" / _DIGEST


def _in_package(py_file):
    try:
        return Path(py_file).resolve().is_relative_to(PACKAGE_DIR)
    except (OSError, ValueError):
        return False


def _locator_class():
    """A numba cache locator for the package's files, in :func:`kernel_cache_dir`.

    numba picks the first of its locator classes that accepts a function's
    file (``numba.core.caching``, *Notes on Caching*); this one accepts only
    the package's files and sits right after the ``NUMBA_CACHE_DIR`` one.
    """
    # (numba < 0.62 spells its classes with a leading underscore)
    base = getattr(caching, "UserWideCacheLocator", None) or caching._UserWideCacheLocator

    class KernelCacheLocator(base):
        def __init__(self, py_func, py_file):
            super().__init__(py_func, py_file)
            self._cache_path = str(kernel_cache_dir() / self.get_suitable_cache_subpath(py_file))

        @classmethod
        def from_function(cls, py_func, py_file):
            if not _in_package(py_file):
                return None
            # None when the folder cannot be made or written: numba's own
            # locators come next
            return super().from_function(py_func, py_file)

    return KernelCacheLocator


def _install_locator():
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    classes = impl._locator_classes
    if any(getattr(cls, "__name__", "") == "KernelCacheLocator" for cls in classes):
        return
    provided = getattr(caching, "UserProvidedCacheLocator", None) \
        or getattr(caching, "_UserProvidedCacheLocator", None)
    at = classes.index(provided) + 1 if provided in classes else 0
    classes.insert(at, _locator_class())


#: Processes compiling within this many seconds of the last notice say nothing.
NOTICE_QUIET_SECONDS = 600


def _first_to_announce(folder):
    """Whether no other process announced compiling into ``folder`` lately (and now this one has).

    The workers of a LocalCluster start compiling the same kernels at the
    same moment, into the same folder: a marker file there keeps the
    terminal they share down to one notice.
    """
    marker = Path(folder) / "compile-notice"
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        try:
            if time.time() - marker.stat().st_mtime < NOTICE_QUIET_SECONDS:
                return False
            os.utime(marker)
        except OSError:
            pass
        return True
    except OSError:   # no writable folder: each process says it
        return True


class _CompileNotice(event.Listener):
    """Print :data:`_NOTICE` once, when numba first compiles one of the package's kernels.

    Listens to numba's ``"numba:compile"`` event (numba's docs, *Event API*),
    which a dispatcher sends only when it compiles, not when it loads a
    kernel from the cache.  Once per process, and only in the first of the
    processes that start compiling into one folder within
    :data:`NOTICE_QUIET_SECONDS`.
    """

    def __init__(self, stream=None):
        self.stream = stream
        self.printed = False
        self._lock = threading.Lock()

    def on_start(self, event):
        if self.printed:
            return
        dispatcher = event.data.get("dispatcher") if isinstance(event.data, dict) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module.split(".")[0] != "daskelastic":
            return
        with self._lock:
            if self.printed:
                return
            self.printed = True
        where = kernel_cache_dir()
        if not _first_to_announce(where):
            return
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            print(_NOTICE.format(where=where), file=stream, flush=True)
        except (OSError, ValueError):   # a closed or missing stderr: say nothing
            pass

    def on_end(self, event):
        pass


_notice = None


def install():
    """Cache the package's kernels in :func:`kernel_cache_dir`; announce their compilation.

    Idempotent.  Does nothing with ``NUMBA_DISABLE_JIT=1`` (nothing is
    compiled then).

    Examples
    --------
    >>> from daskelastic import _kernel_cache
    >>> _kernel_cache.install()   # done by ``import daskelastic``
    """
    global _notice
    if config.DISABLE_JIT or _notice is not None:
        return
    try:
        _install_locator()
    except (AttributeError, ValueError):   # pragma: no cover - a numba of other internals
        pass   # numba's own locators then: beside the sources, as before
    _notice = _CompileNotice()
    event.register("numba:compile", _notice)


install()
