"""Recovering from lost workers: what survived, and the lost chunks re-read with ``α = 0``."""

import time
from collections import defaultdict

import dask.config
from dask.utils import parse_timedelta

from ... import config
from ...driver import ConnectionLost, WorkersLost
from .calls import (
    ask_scheduler,
    gather_watching,
    is_lost_error,
    result_watching,
    scheduler_workers,
)
from .worker import resync

__all__ = []


def _connect_timeout():
    """Seconds a client tries to reconnect to its scheduler (``Client._reconnect``)."""
    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))


class _Recovery:
    """The recovery of :class:`~daskelastic.backends.dask.DaskBackend` (its state lives there)."""

    def recover(self, lost, *, discard_round=None, settlements=None, speeds=None):
        """Carry on without the ``lost`` workers, whatever was under way.

        The running round is asked to stop on the live workers and waited
        for.  Then, in a new epoch (see
        ``worker.WorkerFit``), every live
        worker the fit ever sent chunks to says which chunks it holds, and
        settles its pending round: committed where ``settlements`` commits
        it (the last round's, which a worker may not have received),
        discarded otherwise — so ``discard_round``, the round that was
        running, is discarded everywhere.  The chunks held nowhere (the lost
        workers', and those of a move or a load cut short) are re-read from
        the input onto live workers (balanced by ``speeds``), their ``α``
        restarted at zero: in-memory chunks from the copies kept on the
        driver, dask blocks by recomputing them from the arrays' task
        graphs.  Workers that die meanwhile are recovered from too.  When
        every worker of the fit is gone, the fit takes the cluster's other
        workers (waiting ``daskelastic.fault.worker-timeout`` seconds for
        one, e.g. a worker its nanny restarts).  The driver recomputes ``w``
        from the workers' ``α`` afterwards.

        Parameters
        ----------
        lost : iterable of str
            Addresses of the workers that died.
        discard_round : int, optional
            The round that was running (discarded, as any pending round the
            settlements do not commit).
        settlements : dict, optional
            ``{worker: (round_id, gamma or None)}`` of the last round.
        speeds : dict, optional
            ``{worker: relative throughput}`` for placing the re-read chunks;
            1 for a worker not given.

        Returns
        -------
        dict
            ``{chunk_id: worker}`` of the re-read chunks.

        Raises
        ------
        RuntimeError
            When every worker was lost and none joined in time.
        """
        lost = set(lost)
        self._finish_round(lost)
        deadline = None
        while True:
            try:
                reread = self._resync(lost, settlements or {}, speeds or {})
                break
            except ConnectionLost:
                # the client may not have noticed yet: _resync waits for it to
                # reconnect, or says it gave up
                deadline = deadline or time.monotonic() + 2 * _connect_timeout()
                if time.monotonic() > deadline:
                    raise RuntimeError("the connection to the Dask scheduler was lost "
                                       "during the fit and not regained") from None
                time.sleep(0.1)
            except WorkersLost as more:
                lost.update(more.workers)
        self.lost.extend(w for w in sorted(lost) if w not in self.lost)
        self.publish()
        return reread

    def _finish_round(self, lost):
        """Stop the running round on the live workers and wait for it; add losses to ``lost``."""
        pending, self._pending, self._signals = self._pending, {}, {}
        calls = [(a, c) for a, c in pending.items() if a not in lost] + self._stop_calls
        self._stop_calls = []
        if pending and self._round_id is not None:
            live = [a for a in pending if a not in lost]
            if live:
                try:
                    self.stop_round(self._round_id, live)
                except Exception as e:  # noqa: BLE001 - a worker may have gone too
                    if not is_lost_error(e, self.client, live):
                        raise
                calls += self._stop_calls
                self._stop_calls = []
        deadline = time.monotonic() + 2 * _connect_timeout()
        for a, call in calls:
            # the round is discarded: only its end matters, not its result
            while a not in lost:
                try:
                    result_watching(self.client, call, [a])
                except ConnectionLost:
                    # the scheduler cannot say whether the worker lives: wait
                    # on (a round that ran on would be discarded at the next)
                    if call.done() or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                    continue
                except WorkersLost as more:
                    lost.update(more.workers)
                except Exception:  # noqa: BLE001 - e.g. an actor released with the connection
                    pass
                break

    def _resync(self, lost, settlements, speeds):
        """One attempt of :meth:`recover`'s survey and re-reading (may raise WorkersLost)."""
        self._await_connection()
        # actors the scheduler released (the client lost its connection) start again
        for a, future in list(self._actor_futures.items()):
            if future.status not in ("pending", "finished"):
                self._actors.pop(a, None)
                del self._actor_futures[a]
        self._epoch += 1
        live = set(scheduler_workers(self.client)) - lost
        survey = sorted(w for w in self._touched if w in live)
        answers = ask_scheduler("asking the workers what they hold",
                                self.client.run, resync, self.fit_id, self._epoch,
                                {w: settlements.get(w) for w in survey},
                                workers=survey, on_error="return") if survey else {}
        gone = set(survey) - set(answers)
        placement = {}
        for w, answer in answers.items():
            if isinstance(answer, Exception):
                if not is_lost_error(answer, self.client, [w]):
                    raise answer
                gone.add(w)
            elif answer:
                placement[w] = sorted(answer)
        if gone:
            raise WorkersLost(sorted(gone))
        for w in lost:
            self._actors.pop(w, None)
            self._actor_futures.pop(w, None)
            if w in self._workers:
                self._workers.remove(w)
        self.placement = placement
        held = {c for cids in placement.values() for c in cids}
        missing = sorted(set(self.chunk_sizes) - held)
        if not missing:
            return {}
        keep = self._recovery_workers(live, lost)
        speeds = {w: speeds.get(w, 1.0) for w in keep}
        load = {w: sum(self.chunk_sizes[c] for c in placement.get(w, ())) for w in keep}
        plan = defaultdict(list)
        for c in sorted(missing, key=lambda c: (-self.chunk_sizes[c], c)):
            dest = min(keep, key=lambda w: ((load[w] + self.chunk_sizes[c]) / speeds[w],
                                            keep.index(w)))
            plan[dest].append(c)
            load[dest] += self.chunk_sizes[c]
        loads = (self._send_chunks(plan) if self._source[0] == "chunks"
                 else self._reread_blocks(plan))
        try:
            self._check_blocks(plan, gather_watching(self.client, loads))
        finally:
            self._cancel_tasks(loads)
        for w, cids in plan.items():
            self.placement[w] = sorted(self.placement.get(w, []) + cids)
        return {c: w for w, cids in plan.items() for c in cids}

    def _await_connection(self):
        """Wait while the client reconnects to the scheduler; raise once it gave up.

        Raises
        ------
        RuntimeError
            When the client closed: its connection to the scheduler was lost
            and not regained within ``distributed.comm.timeouts.connect``.
        """
        deadline = time.monotonic() + 2 * _connect_timeout()
        while self.client.status == "connecting" and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.client.status != "running":
            raise RuntimeError(
                f"the connection to the Dask scheduler was lost during the fit and not "
                f"regained (the client is {self.client.status}); the workers drop the "
                f"fit's state when they restart")

    def _recovery_workers(self, live, lost):
        """Where re-read chunks may go: the fit's live workers, else the cluster's others.

        With none of its own left, the fit takes as many of the cluster's
        other workers as it lost (those it released last), waiting up to
        ``daskelastic.fault.worker-timeout`` seconds for one to join.
        """
        keep = [w for w in self._workers if w in live]
        if keep:
            return keep
        deadline = time.monotonic() + float(config.get("fault.worker-timeout"))
        while True:
            others = sorted(live, key=lambda w: (w in self.released, w))
            if others:
                keep = others[:max(len(lost), 1)]
                self._workers.extend(keep)
                self.released = [w for w in self.released if w not in keep]
                return keep
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"every worker of the fit was lost ({', '.join(sorted(lost))}) and no "
                    f"worker joined the cluster within "
                    f"{config.get('fault.worker-timeout')} s (daskelastic.fault.worker-timeout)")
            time.sleep(0.25)
            live = set(scheduler_workers(self.client)) - lost
