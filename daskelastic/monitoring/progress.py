"""A one-line progress bar for ``verbose=1`` fits, in a terminal or a notebook."""

import math
import sys
import time
import warnings

from .records import estimate_eta

__all__ = ["ProgressBar"]


def _fmt_seconds(s):
    if s is None or not math.isfinite(s):
        return "?"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class ProgressBar:
    """Show a fit's progress on one line rewritten with a carriage return.

    The bar fills with the larger of two fractions: rounds done of
    ``max_iter``, and the way from the first round's duality gap down to
    ``tol`` on a log scale.  The line also shows the current gap, the workers
    holding chunks, the elapsed time and an estimate of the time left
    (:func:`~daskelastic.monitoring.estimate_eta`).

    In a terminal or a notebook the line is redrawn in place; a warning
    issued while it shows (a ``ConvergenceWarning``, say) is printed above
    it, and the bar drawn again below.  Written elsewhere (a file, a pipe, a
    CI log: a stream that is not a TTY), carriage returns would pile up on
    one line, so the bar is printed as plain lines instead: the first round,
    then one line every ``log_interval`` seconds, and the end.

    Parameters
    ----------
    tol : float
        The fit's target relative duality gap.
    max_iter : int
        The fit's maximum number of rounds.
    per_round : bool, default=False
        Print one line per round instead of a bar (``verbose >= 2``).
    stream : file-like, optional
        Where to write; ``sys.stdout`` by default.
    min_interval : float, default=0.2
        Seconds between two redraws of the bar (the last round is always
        drawn by :meth:`close`).
    log_interval : float, default=10.0
        Seconds between two lines where the stream is not a terminal.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bar = ProgressBar(tol=1e-4, max_iter=100, stream=out, min_interval=0)
    >>> bar({"round": 0, "time": 0.1, "duality_gap": 1.0, "n_workers": 2})
    >>> bar({"round": 1, "time": 0.2, "duality_gap": 1e-5, "n_workers": 2})
    >>> bar.close("converged")
    >>> print(out.getvalue().splitlines()[-1])
    [daskelastic] [####################] 100% converged: round 1/100  gap 1.0e-05  workers 2  0.2s
    """

    def __init__(self, *, tol, max_iter, per_round=False, stream=None, min_interval=0.2,
                 log_interval=10.0):
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        self.per_round = per_round
        self.stream = stream
        self.min_interval = min_interval
        self.log_interval = log_interval
        self.entries = []
        self._last_draw = -math.inf
        self._width = 0
        self._inline = None        # redrawn in place (a terminal, a notebook), once known
        self._showwarning = None   # ours, while the bar shows in place

    def __call__(self, entry):
        """Record one round's history entry and redraw."""
        self.entries.append(entry)
        if self.per_round:
            self._write(f"[daskelastic] round {entry['round']:4d}  "
                        f"gap {entry['duality_gap']:.3e}  primal {entry.get('primal', 0):.6g}  "
                        f"workers {entry['n_workers']}  {entry['time']:.2f}s\n")
            return
        if self._inline is None:
            self._inline = _redraws_in_place(self._stream())
            if self._inline:
                self._catch_warnings()
        now = time.monotonic()
        if now - self._last_draw >= (self.min_interval if self._inline else self.log_interval):
            self._last_draw = now
            self._draw(None)

    def close(self, status):
        """Draw the final state of the bar and end its line.

        Parameters
        ----------
        status : str
            How the fit ended (``"converged"``, ``"max_iter"``, ``"failed"``, ...).
        """
        self._release_warnings()
        if self.per_round:
            # the last entry's round number is n_iter_ (the entries also hold
            # round 0, the start, which is no round of work)
            rounds = self.entries[-1]["round"] if self.entries else 0
            self._write(f"[daskelastic] {status} after {rounds} rounds\n")
            return
        self._draw(status)
        if self._inline:
            self._write("\n")

    def fraction(self):
        """Fraction of the fit done.

        Returns
        -------
        float
            In [0, 1].
        """
        if not self.entries:
            return 0.0
        last = self.entries[-1]
        done = last["round"] / max(self.max_iter, 1)
        g0, g = self.entries[0]["duality_gap"], last["duality_gap"]
        if g <= self.tol:
            return 1.0
        if self.tol > 0 and g0 > self.tol and g > 0:
            done = max(done, math.log(g0 / g) / math.log(g0 / self.tol))
        return min(max(done, 0.0), 1.0)

    def _draw(self, status):
        if not self.entries:
            return
        last = self.entries[-1]
        frac = 1.0 if status in ("converged", "max_iter") else self.fraction()
        filled = int(round(20 * frac))
        head = f"[daskelastic] [{'#' * filled}{'-' * (20 - filled)}] {100 * frac:3.0f}%"
        if status is not None:
            head += f" {status}:"
        line = (f"{head} round {last['round']}/{self.max_iter}  "
                f"gap {last['duality_gap']:.1e}  workers {last['n_workers']}  "
                f"{_fmt_seconds(last['time'])}")
        if status is None:
            eta = estimate_eta(self.entries, tol=self.tol, max_iter=self.max_iter)
            line += f"  ETA {_fmt_seconds(eta)}"
        if not self._inline:
            self._write(line + "\n")
            return
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._write("\r" + line + " " * pad)

    def _catch_warnings(self):
        """Print warnings above the bar while it shows (as ``tqdm.write`` does).

        A warning goes to stderr, which shares the terminal's line with the
        bar: written as is, it would continue the bar's line, and the next
        redraw overwrite its end.
        """
        previous = warnings.showwarning

        def showwarning(message, category, filename, lineno, file=None, line=None):
            if self._showwarning is None:   # closed, and a later bar's hook restored ours
                previous(message, category, filename, lineno, file, line)
                return
            if self._width:
                self._write("\r" + " " * self._width + "\r")   # the line cleared
                self._width = 0
            previous(message, category, filename, lineno, file, line)
            self._draw(None)

        self._showwarning = (showwarning, previous)
        warnings.showwarning = showwarning

    def _release_warnings(self):
        if self._showwarning is not None:
            ours, previous = self._showwarning
            if warnings.showwarning is ours:   # else another hook came later: leave it
                warnings.showwarning = previous
            self._showwarning = None

    def _stream(self):
        return self.stream if self.stream is not None else sys.stdout

    def _write(self, text):
        stream = self._stream()
        stream.write(text)
        stream.flush()


def _redraws_in_place(stream):
    """Whether ``stream`` shows a carriage return as one: a terminal, or a notebook.

    Jupyter's output streams are no TTY but draw ``\r`` in place.
    """
    if type(stream).__module__.split(".")[0] == "ipykernel":
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False
