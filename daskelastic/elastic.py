"""Between rounds: scale in, rebalance, take in joining workers, recover lost ones.

The :class:`ElasticController` is the driver's half of elasticity.  After
every round the driver hands it the round's history entry and results; it
feeds the scaling policy (:mod:`daskelastic.scaling`) and the throughput
tracker, and — only between rounds, never while one runs — carries out on the
backend what they call for:

- **scale-in**: the policy's target ``K′ < K`` releases ``K − K′`` workers
  (slowest first, then least data); their chunks move, with their ``α``, to
  the workers that stay, balanced by measured throughput
  (:func:`daskelastic.placement.plan_moves`), and the freed workers are
  retired or handed to the cluster (``release_workers``);
- **rebalancing**: when the placement's predicted round time (rows over
  measured speed, slowest worker) would fall by ``rebalance_gain`` by moving
  chunks, they move;
- **joins**: workers that appear in the cluster during the fit get chunks
  (while the fit has fewer workers than its target, once it has one);
- **departures**: workers that announce they will leave (a simulated
  cluster's ``"leave"`` events) have their chunks moved, with their ``α``,
  to the others, and are let go;
- **losses**: a worker that died has its chunks re-read from the input onto
  live workers with ``α = 0`` (the driver recomputes ``w`` from the surviving
  ``α``).

Moving a chunk with its ``α`` keeps ``w = Σ α_i x_i / (λn)`` exactly, so the
driver's iterate does not change; only a loss changes it.  Every operation is
recorded in the history entry's ``events``.  The controller is the one owner
of placement decisions: backends report what happened to their workers and
carry out the moves they are given.

The backend is an :class:`~daskelastic.backends.base.ElasticBackend`
(:class:`daskelastic.backends.dask.DaskBackend`,
:class:`daskelastic.backends.simulated.SimulatedBackend`); the controller
times what it does with the backend's ``clock()``: wall seconds on Dask,
virtual seconds on a simulated cluster.
"""

import statistics
import time
from typing import NamedTuple

from . import config
from .placement import plan_moves, predicted_round_time, workers_to_release
from .scaling import ScalingRecord, ThroughputTracker

__all__ = ["ElasticController", "ElasticStep", "lost_event"]

#: Solver calls shorter than this (seconds) do not measure a worker's share of
#: a core: a few operating-system time slices, or twenty ticks of a coarse
#: thread CPU clock (~16 ms on Windows).
_SHARE_MIN_SECONDS = max(0.005, 20 * time.get_clock_info("thread_time").resolution)


class ElasticStep(NamedTuple):
    """What :meth:`ElasticController.after_round` did after a round.

    Attributes
    ----------
    events : list of dict
        The operations, for the round's history entry.
    settled : bool
        Whether the backend applied the round's settlements (the driver
        must not send them again).
    alpha_reset : bool
        Whether a worker was lost: ``w`` must be recomputed from the
        workers' ``α``.
    scaling : dict or None
        The scaling policy's decision: ``target``, ``reason`` and its
        estimates.
    """

    events: list
    settled: bool
    alpha_reset: bool
    scaling: dict | None


class ElasticController:
    """Carry out scaling decisions, rebalancing, joins and loss recovery on a backend.

    Parameters
    ----------
    backend : daskelastic.backends.base.ElasticBackend
        The fit's workers (``daskelastic.backends.dask.DaskBackend``,
        :class:`daskelastic.backends.simulated.SimulatedBackend`).
    scaling_policy : daskelastic.scaling.ScalingPolicy
        Decides the number of workers after each round.  Its
        ``release_workers`` (``"auto"``, True or False) says what becomes of
        the workers a scale-in lets go: ``True`` retires them
        through the scheduler (on a simulated cluster: they leave it and
        their billing stops); ``False`` just stops using them (a simulated
        worker stays up, idle and billed); ``"auto"`` retires them when the
        fit started its cluster itself (always on a simulated cluster),
        leaves them to an attached :class:`~daskelastic.ElasticAdaptive`
        (which closes them), and otherwise just stops using them.
    max_workers : int, optional
        Never take in joining workers beyond this many (default: no limit).
    check_interval : float, optional
        Seconds between checks of the cluster's workers (joins and losses),
        on the backend's clock (virtual seconds on a simulated cluster); by
        default the backend's ``check_interval`` when it has one (0 on a
        simulated cluster, where a check is free), else
        ``daskelastic.elastic.check-interval``.
    rebalance : "auto" or bool, optional
        Rebalance chunks by measured throughput; ``"auto"``: only with a
        scaling policy (rebalancing follows timings: a fit with fixed workers
        stays reproducible).  ``daskelastic.elastic.rebalance`` by default.
    rebalance_gain : float or None, optional
        Rebalance when the predicted round time falls by at least this share
        (None: never); ``daskelastic.elastic.rebalance-gain`` by default.
    rebalance_rounds : int, optional
        Rounds measured on a placement before it may be rebalanced;
        ``daskelastic.elastic.rebalance-rounds`` by default.

    Examples
    --------
    :func:`~daskelastic.driver.run_cocoa` makes one for an elastic backend; by
    hand, between rounds::

        from daskelastic.elastic import ElasticController
        from daskelastic.scaling import ConvergenceScalingPolicy, make_scaling_policy

        elastic = ElasticController(
            backend, make_scaling_policy(ConvergenceScalingPolicy(release_workers=True)))
        elastic.observe(entry, results)          # after each round
        step = elastic.after_round(settlements)
    """

    def __init__(self, backend, scaling_policy, *, max_workers=None, check_interval=None,
                 rebalance=None, rebalance_gain="config", rebalance_rounds=None):
        self.backend = backend
        self.policy = scaling_policy
        # (validated by ScalingPolicy)
        self.release_workers = scaling_policy.release_workers
        self.target = max_workers
        if rebalance is None:
            rebalance = config.get("elastic.rebalance")
        if rebalance == "auto":
            rebalance = scaling_policy.name != "fixed"
        self.rebalance = bool(rebalance)
        if check_interval is None:
            check_interval = backend.check_interval
        if check_interval is None:
            check_interval = config.get("elastic.check-interval")
        if rebalance_gain == "config":
            rebalance_gain = config.get("elastic.rebalance-gain")
        if rebalance_rounds is None:
            rebalance_rounds = config.get("elastic.rebalance-rounds")
        self.check_interval = float(check_interval)
        self.rebalance_gain = None if rebalance_gain is None else float(rebalance_gain)
        self.rebalance_rounds = int(rebalance_rounds)
        self.tracker = ThroughputTracker()
        self._seen = set(backend.live_workers())
        # the backend's clock: wall seconds on Dask, virtual ones on a
        # simulated cluster (so a simulated fit stays reproducible)
        self._last_check = backend.clock()
        self._rounds_on_placement = 0
        # workers whose chunk set changed: their next round repacks its rows,
        # which is not their speed
        self._repacking = set()

    # -- observing ------------------------------------------------------------
    def observe(self, entry, results):
        """Record a finished round's throughputs and convergence.

        Parameters
        ----------
        entry : daskelastic.history.RoundEntry
            The round's history entry.
        results : dict
            ``{worker: LocalResult}`` of the round.
        """
        self.tracker.observe({k: (r.steps, r.seconds) for k, r in results.items()
                              if k not in self._repacking})
        self._repacking.clear()
        self.policy.observe(ScalingRecord(entry.round, entry.time, entry.duality_gap,
                                          entry.n_workers, core_share=_core_share(results)))
        self._rounds_on_placement += 1

    def speeds(self, workers=None):
        """Measured throughput of workers.

        Parameters
        ----------
        workers : iterable, optional
            Worker ids; those holding chunks by default.

        Returns
        -------
        dict
            ``{worker: coordinate steps per second}``.
        """
        return self.tracker.speeds(list(self.backend.placement if workers is None
                                        else workers))

    # -- acting between rounds ------------------------------------------------
    def after_round(self, settlements):
        """Act on the last round: recover, scale in, take in joiners or rebalance.

        Parameters
        ----------
        settlements : dict
            The settlements the driver would send with the next round; they
            are applied first when chunks must move.

        Returns
        -------
        ElasticStep
            What was done, and the scaling policy's decision.
        """
        events, settled, alpha_reset = [], False, False
        now = self.backend.clock()
        joined = []
        if now - self._last_check >= self.check_interval:
            self._last_check = now
            live = self.backend.live_workers()
            lost = [w for w in self.backend.placement if w not in live]
            if lost:
                events.append(self.recover(lost, settlements=settlements))
                settled = alpha_reset = True
            # a joiner that already holds chunks was placed by the backend
            # (a simulated cluster without a target): it is not moved again
            placement = self.backend.placement
            joined = [w for w in live if w not in self._seen and w not in placement]
            self._seen.update(live)
        leaving = self.backend.departing()
        if leaving:
            if not settled:
                self.backend.settle(settlements)
                settled = True
            events.append(self._depart(leaving))
        decision = self.policy.target(len(self.backend.placement))
        scaling = {"target": decision.target, "reason": decision.reason,
                   **decision.estimate}
        K = len(self.backend.placement)
        if decision.target < K:
            t0 = self.backend.clock()
            if not settled:
                self.backend.settle(settlements)
                settled = True
            events.append(self._scale_in(decision.target))
            events[-1]["seconds"] = self.backend.clock() - t0
            return ElasticStep(events, settled, alpha_reset, scaling)
        room = None if self.target is None else max(self.target - K, 0)
        joined = joined if room is None else joined[:room]
        if joined:
            self.backend.add_workers(joined)
        event = self._rebalance(joined)
        if event is not None:
            t0 = self.backend.clock()
            if not settled:
                self.backend.settle(settlements)
                settled = True
            self._apply(event)
            event["seconds"] = self.backend.clock() - t0
            events.append(event)
        return ElasticStep(events, settled, alpha_reset, scaling)

    def _scale_in(self, target):
        placement = self.backend.placement
        K = len(placement)
        speeds = self.speeds()
        rows = {w: sum(self.backend.chunk_sizes[c] for c in cids)
                for w, cids in placement.items()}
        release = workers_to_release(len(placement) - target, speeds, rows)
        t0 = self.backend.clock()
        moves = self._move_off(release, speeds)
        t1 = self.backend.clock()
        retire = self._retire()
        self.backend.release(release, retire=retire, target=target)
        t2 = self.backend.clock()
        self.target = target
        self.tracker.forget(release)
        self._rounds_on_placement = 0
        return {"event": "scale_in", "from": K, "to": K - len(release), "released": release,
                "retired": retire, "moves": len(moves),
                "move_seconds": t1 - t0, "release_seconds": t2 - t1}

    def _depart(self, leaving):
        """Move the chunks of workers that announced their departure; let them go."""
        if not [w for w in self.backend.placement if w not in leaving]:
            raise RuntimeError(f"workers {leaving} are leaving and no worker is left to "
                               "hold their chunks")
        t0 = self.backend.clock()
        try:
            moves = self._move_off(leaving, self.speeds())
        finally:
            # also when a worker dies during the move: those whose chunks
            # all left go as they announced
            gone = [w for w in leaving if not self.backend.placement.get(w)]
            if gone:
                self.backend.release(gone, retire=True)
        self.tracker.forget(leaving)
        self._rounds_on_placement = 0
        return {"event": "leave", "left": list(leaving), "moves": len(moves),
                "seconds": self.backend.clock() - t0}

    def _move_off(self, workers, speeds):
        """Move every chunk of ``workers`` to the others, balanced by ``speeds``; the moves."""
        placement = self.backend.placement
        keep = [w for w in placement if w not in workers]
        _, moves = plan_moves(placement, self.backend.chunk_sizes,
                              {w: speeds[w] for w in keep})
        self._repacking.update(keep)
        self.backend.move_chunks(moves)
        return moves

    def _retire(self):
        if self.release_workers is True:
            return True
        if self.release_workers is False:
            return False
        if self.backend.owns_cluster:
            return True
        # an ElasticAdaptive closes the released workers itself; without
        # one, the workers just stop being used
        return False

    def _rebalance(self, joined):
        placement = self.backend.placement
        workers = list(placement) + [w for w in joined if w not in placement]
        if not joined:
            if not self.rebalance or self.rebalance_gain is None:
                return None
            if self._rounds_on_placement < self.rebalance_rounds:
                return None
            if any(self.tracker.n_measured(w) < 2 for w in workers):
                return None
        speeds = self.speeds(workers)
        new, moves = plan_moves(placement, self.backend.chunk_sizes, speeds, keep=workers)
        if not moves:
            return None
        before = predicted_round_time(placement, self.backend.chunk_sizes, speeds)
        after = predicted_round_time(new, self.backend.chunk_sizes, speeds)
        if not joined and after > (1.0 - self.rebalance_gain) * before:
            return None
        return {"event": "join" if joined else "rebalance", "joined": list(joined),
                "moves": moves, "predicted_seconds": (before, after)}

    def _apply(self, event):
        self._repacking.update(w for _, src, dst in event["moves"] for w in (src, dst))
        self.backend.move_chunks(event["moves"])
        event["moves"] = len(event["moves"])
        self._rounds_on_placement = 0

    def recover(self, lost, *, discard_round=None, settlements=None):
        """Recover from the loss of workers (see ``DaskBackend.recover``).

        Parameters
        ----------
        lost : iterable
            The lost workers.
        discard_round : int, optional
            The round that was running, to discard on the live workers.
        settlements : dict, optional
            Settlements of the last round to apply when no round was running.

        Returns
        -------
        dict
            The ``worker_lost`` event for the history.
        """
        lost = list(lost)
        survivors = [w for w in self.backend.placement if w not in lost]
        known = len(self.backend.lost)
        replaced = self.backend.recover(lost, discard_round=discard_round,
                                        settlements=settlements,
                                        speeds=self.speeds(survivors))
        # with those that died while it recovered
        lost += [w for w in self.backend.lost[known:] if w not in lost]
        self.tracker.forget(lost)
        self._repacking.update(replaced.values())
        self._rounds_on_placement = 0
        return lost_event(lost, replaced, discard_round)


def lost_event(lost, reread, discard_round):
    """The history event of a recovery: ``worker_lost``, or ``connection_lost``.

    Parameters
    ----------
    lost : list
        The workers lost; none when the client lost its connection to the
        scheduler instead.
    reread : iterable
        The chunks re-read from the input.
    discard_round : int or None
        The round discarded.

    Returns
    -------
    dict
        ``{"event", "lost", "reread_chunks", "discarded_round"}``.
    """
    return {"event": "worker_lost" if lost else "connection_lost", "lost": list(lost),
            "reread_chunks": sorted(reread), "discarded_round": discard_round}


def _core_share(results):
    """Median over the workers of solver CPU seconds / wall seconds, or None.

    1 when each worker had a core to itself, ~0.5 for four worker processes
    on two cores.  Calls shorter than ``_SHARE_MIN_SECONDS`` and results
    without a CPU time (the simulated cluster) do not count.
    """
    shares = [min(r.cpu_seconds / r.seconds, 1.0) for r in results.values()
              if r.cpu_seconds is not None and r.seconds >= _SHARE_MIN_SECONDS]
    return statistics.median(shares) if shares else None
