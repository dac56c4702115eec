"""The interfaces between the driver and its workers, as :class:`typing.Protocol` classes.

:class:`Backend` is what the round loop (:func:`daskelastic.driver.run_cocoa`)
needs of any backend: run a round on every worker, settle the previous one,
gather sums.  :class:`ElasticBackend` adds what the
:class:`~daskelastic.elastic.ElasticController` needs to change the workers
between rounds: the placement of the chunks, moving chunks with their dual
state, taking in and letting go of workers, recovering from lost ones.  The
controller decides; an elastic backend carries out.

The backends subclass these protocols explicitly to inherit their default
methods (PEP 544, "Explicitly declaring implementation"), and the driver
tells an elastic backend from another with ``isinstance``.
"""

import time
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Backend", "ElasticBackend", "Settlements"]

#: ``{worker: (round_id, gamma or None)}``: commit ``γ·Δα`` of the worker's
#: round ``round_id``, or discard it when ``gamma`` is None.
Settlements = dict


class Backend(Protocol):  # numpydoc ignore=PR01
    """Where the workers run.

    A round is asynchronous: :meth:`start_round` gives every worker the
    round-start ``w`` (for the margins), ``1/(λn)`` of the problem its dual
    state belongs to, the settlement of its previous round and an optional
    slowdown; :meth:`wait_results` returns results as they arrive;
    :meth:`stop_round` asks workers still running to stop at their next
    check of the stop flag (they still return a result).  :meth:`clock` is
    the time those calls are measured in.  :meth:`settle` sends settlements
    without starting a round.  A settlement is ``(round_id, gamma)``: commit
    ``γ·Δα`` of that round, or discard it when ``gamma`` is ``None``.

    The backends subclass it to inherit its default methods:
    :class:`~daskelastic.backends.inprocess.InProcessBackend` (workers in
    this process), and the elastic ones (:class:`ElasticBackend`),
    :class:`~daskelastic.backends.dask.DaskBackend` and
    :class:`~daskelastic.backends.simulated.SimulatedBackend`.

    Examples
    --------
    Two workers in this process, one round, its work committed:

    >>> import numpy as np
    >>> from daskelastic.backends import InProcessBackend
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(400, 3))
    >>> Y = np.sign(X[:, :1])
    >>> problem = Problem(loss=2, lam=1e-2, n_samples=400, n_features=3, n_targets=1,
    ...                   intercept_scaling=0.0)
    >>> chunks = make_chunks(X, Y, np.ones(400), split_rows(400, n_chunks=4))
    >>> backend = InProcessBackend(problem, chunks, n_workers=2)
    >>> backend.workers()
    ['local-0', 'local-1']
    >>> results = backend.run_round(0, problem.zeros(), {}, inv_lam_n=problem.inv_lam_n,
    ...                             sigma=2.0, steps=None, seed=0)
    >>> {worker: r.steps for worker, r in results.items()}
    {'local-0': 200, 'local-1': 200}
    >>> backend.settle({worker: (0, 1.0) for worker in results})
    >>> w = sum(r.dw for r in results.values())
    >>> bool(np.allclose(backend.alpha_sum() * problem.inv_lam_n, w))
    True
    """

    def workers(self) -> list:
        """The ids of the workers holding chunks."""
        raise NotImplementedError

    def start_round(self, round_id: int, w: np.ndarray, settlements: Settlements, *,
                    inv_lam_n: float, sigma: float, steps: int | None, seed: int,
                    slowdowns: dict | None = None) -> None:
        """Start one round on every worker holding chunks.

        Parameters
        ----------
        round_id : int
            Id of the round; results and settlements refer to it.
        w : ndarray of shape (d + 1, m)
            The round-start iterate, from which the workers compute margins.
        settlements : dict
            ``{worker: (round_id, gamma or None)}``: what becomes of each
            worker's previous round, applied before this one starts.
        inv_lam_n : float
            ``1 / (λ n)`` of the problem the workers' dual state belongs to
            (with acceleration, ``λ`` includes the proximal weight ``κ``).
        sigma : float
            Subproblem parameter ``σ′``.
        steps : int or None
            Coordinate steps per worker; None: one pass over its rows.
        seed : int
            Seed of the visiting orders (drawn with the round id).
        slowdowns : dict, optional
            ``{worker: factor}``: make workers stragglers on purpose (see
            :mod:`daskelastic.testing`).
        """
        raise NotImplementedError

    def wait_results(self, timeout: float | None = None) -> dict:
        """Wait up to ``timeout`` seconds for more results of the running round.

        Parameters
        ----------
        timeout : float or None
            Seconds on :meth:`clock` to wait at most; None waits without limit.

        Returns
        -------
        dict
            ``{worker: LocalResult}`` of the results that arrived since the
            last call: at least one, unless the timeout passed first (then
            maybe none).
        """
        raise NotImplementedError

    def stop_round(self, round_id: int, workers: Iterable) -> None:
        """Ask ``workers`` to stop round ``round_id`` at their next flag check.

        Parameters
        ----------
        round_id : int
            The running round.
        workers : iterable
            Ids of the workers to stop; they still return a result.
        """
        raise NotImplementedError

    def clock(self) -> float:
        """Seconds on the clock rounds are timed with.

        Returns
        -------
        float
            The time now; by default ``time.perf_counter()``.
        """
        return time.perf_counter()

    def run_round(self, round_id: int, w: np.ndarray, settlements: Settlements, *,
                  inv_lam_n: float, sigma: float, steps: int | None, seed: int,
                  slowdowns: dict | None = None) -> dict:
        """Run one round on every worker to the end.

        Calls :meth:`start_round`, then :meth:`wait_results` until every
        worker's result is in.

        Parameters
        ----------
        round_id, w, settlements, inv_lam_n, sigma, steps, seed, slowdowns : object
            As in :meth:`start_round`.

        Returns
        -------
        dict
            ``{worker: LocalResult}`` of every worker.
        """
        self.start_round(round_id, w, settlements, inv_lam_n=inv_lam_n, sigma=sigma,
                         steps=steps, seed=seed, slowdowns=slowdowns)
        expected = len(self.workers())
        results: dict = {}
        while len(results) < expected:
            results.update(self.wait_results(None))
        return results

    def row_sq_norm_sum(self) -> float:
        """``Σ ‖x_i‖²`` over all rows held (without the intercept feature)."""
        raise NotImplementedError

    def before_round(self, settlements: Settlements) -> Settlements:
        """Called before each round, ahead of :meth:`workers`.

        A backend may apply the settlements here, and the cluster events due
        by now (a simulated cluster's joins, departures and failures, which the
        elastic controller then acts on).

        Parameters
        ----------
        settlements : dict
            ``{worker: (round_id, gamma or None)}`` of the last round.

        Returns
        -------
        dict
            The settlements still to be sent with the next round; this base
            implementation returns ``settlements`` unchanged.
        """
        return settlements

    def cost(self) -> float | None:
        """Money spent on workers so far, or None when the backend has no prices."""
        return None

    def take_events(self) -> list[dict]:
        """What the backend did on its own since it was last asked, as history events.

        For example the ``worker_lost`` event of a worker lost while the data
        loaded, recovered from by the backend itself; the driver adds them to
        the next round's ``events``.

        Returns
        -------
        list of dict
            The events, oldest first; this base implementation has none.
        """
        return []

    def settle(self, settlements: Settlements) -> None:
        """Apply settlements without starting a round.

        Parameters
        ----------
        settlements : dict
            ``{worker: (round_id, gamma or None)}``: commit ``γ·Δα`` of the
            worker's round ``round_id``, or discard it when ``gamma`` is None.
        """
        raise NotImplementedError

    def alpha_sum(self) -> np.ndarray:
        """``Σ α_i x_i`` over all rows, gathered from the workers (debugging)."""
        raise NotImplementedError

    def start_duals(self, w: np.ndarray,
                    scales: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Set every row's ``α`` to the dual values that match ``w`` (a warm start).

        See :meth:`daskelastic.solvers.ChunkSolver.start_duals`; no round may
        be pending.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            Coefficients, the intercept coefficient in the last row.
        scales : sequence of float
            Scales at which to sum the dual values of ``s·α``.

        Returns
        -------
        sums : ndarray of shape (len(scales),)
            Those sums over all rows.
        alpha_sum : ndarray of shape (d + 1, m)
            :meth:`alpha_sum` of the new ``α`` (the same call: no second
            round trip).
        """
        raise NotImplementedError

    def scale_duals(self, scale: float) -> None:
        """Multiply every row's ``α`` by ``scale`` (after :meth:`start_duals`).

        Parameters
        ----------
        scale : float
            The factor; ``α`` must stay feasible.
        """
        raise NotImplementedError

    def describe(self, ask_workers: bool = True) -> dict:
        """What each worker holds, for the history and monitoring.

        Parameters
        ----------
        ask_workers : bool
            Ask the workers (what they really hold); with False a backend
            whose workers are remote answers from the driver's own map of the
            chunks, without a round trip.

        Returns
        -------
        dict
            ``{worker: {"chunks": [...], "rows": n}}`` (a backend may add
            keys); this base implementation returns an empty dict.
        """
        return {}

    def close(self) -> None:
        """Release the workers' state."""


@runtime_checkable
class ElasticBackend(Backend, Protocol):  # numpydoc ignore=PR01
    """A backend whose workers can change between rounds.

    The :class:`~daskelastic.elastic.ElasticController` reads the placement
    and the live workers, decides which chunks move where and which workers
    go, and calls these methods to carry it out; it calls them only between
    rounds, never while one runs.  Moving a chunk moves its rows' ``α``
    with it, so ``w = Σ α_i x_i / (λn)`` does not change.

    Attributes
    ----------
    placement : dict
        ``{worker: [chunk ids]}`` of the workers holding chunks.
    chunk_sizes : dict
        ``{chunk id: rows}``.
    released : list
        Workers this fit let go.
    lost : list
        Workers that died during this fit, in the order they were found.
    owns_cluster : bool
        Whether the fit started its cluster (then a scale-in may retire
        workers).
    check_interval : float or None
        Seconds between checks of the cluster's workers, on
        :meth:`Backend.clock`;
        None: the ``daskelastic.elastic.check-interval`` setting.
    """

    placement: dict
    chunk_sizes: dict
    released: list
    lost: list
    owns_cluster: bool
    check_interval: float | None = None

    @property
    def available_workers(self) -> list:
        """Workers of the cluster that are up, holding chunks or not."""
        raise NotImplementedError

    def live_workers(self) -> list:
        """Workers the fit may use now: those holding chunks and joiners to place.

        Returns
        -------
        list
            Their ids; a worker of ``placement`` missing here was lost.
        """
        raise NotImplementedError

    def move_chunks(self, moves: list[tuple]) -> None:
        """Move chunks, with their rows' ``α``, between workers.

        Parameters
        ----------
        moves : list of (chunk_id, source, destination)
            The moves; the settlements of the last round are applied first
            (:meth:`Backend.settle`).

        Raises
        ------
        daskelastic.driver.WorkersLost
            When a worker dies during the move (the controller recovers).
        """
        raise NotImplementedError

    def add_workers(self, workers: list) -> None:
        """Make joined ``workers`` ready to receive chunks.

        Parameters
        ----------
        workers : list
            Workers that joined the cluster during the fit.
        """
        raise NotImplementedError

    def release(self, workers: list, retire: bool = False, target: int | None = None) -> None:
        """Stop using ``workers``, which hold no chunks any more.

        Parameters
        ----------
        workers : list
            Workers a scale-in lets go.
        retire : bool
            Also retire them from the cluster.
        target : int, optional
            The fit's number of workers from now on.
        """
        raise NotImplementedError

    def recover(self, lost: list, *, discard_round: int | None = None,
                settlements: Settlements | None = None,
                speeds: dict | None = None) -> dict:
        """Re-place the chunks of ``lost`` workers, re-read, with ``α = 0``.

        Parameters
        ----------
        lost : list
            The workers lost.
        discard_round : int, optional
            The round that was running, to discard on the live workers.
        settlements : dict, optional
            The last round's settlements, when no round was running.
        speeds : dict, optional
            Measured ``{worker: steps per second}`` of the survivors, to
            place the re-read chunks.

        Returns
        -------
        dict
            ``{chunk id: worker}`` of the re-read chunks.
        """
        raise NotImplementedError

    def departing(self) -> list:
        """Workers holding chunks that announced they will leave (default: none).

        The controller moves their chunks to the other workers, then lets
        them go with :meth:`release` (``retire=True``).

        Returns
        -------
        list
            Their ids.
        """
        return []
