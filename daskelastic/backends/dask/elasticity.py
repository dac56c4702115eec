"""Changing a fit's workers between rounds: moves of chunks with their ``α``, joins, release."""

import time
import uuid
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from ... import adaptive, config
from ...driver import ConnectionLost
from .calls import (
    ask_scheduler,
    gather_watching,
    scheduler_workers,
)
from .worker import (
    drop_fit,
    put_chunks,
    take_chunks,
)

__all__ = []

#: Seconds without a new worker, after one joined, that end the wait of
#: ``ask_for_workers``.
_JOIN_SETTLE = 5.0


class _Elasticity:
    """The elastic operations of :class:`~daskelastic.backends.dask.DaskBackend`.

    The state they change lives on the backend (see its ``__init__``).
    """

    @property
    def available_workers(self):
        """The workers chunks may be placed on."""
        return list(self._workers)

    def publish(self, target=None):
        """Tell the scheduler plugin what this fit holds, wants and let go.

        The plugin vetoes downscaling the workers holding chunks and tells an
        :class:`~daskelastic.ElasticAdaptive` the fit's target.  It is
        installed when missing (``adaptive.publish_fit``)
        and removed after the last fit (:meth:`close`).

        Parameters
        ----------
        target : int, optional
            The fit's target number of workers; by default the workers it
            asked for (:meth:`ask_for_workers`), else the number of workers
            holding chunks.
        """
        self._published = True
        if target is None:
            target = max(len(self.placement), self.wanted or 0)
        ask_scheduler("publishing the fit's placement", adaptive.publish_fit,
                      self.client, self.fit_id, self.placement, target, self.released)

    def ask_for_workers(self, wanted, timeout=None):
        """Ask the cluster's autoscaler for ``wanted`` workers; wait for them if one listens.

        Before the data loads: the fit publishes ``wanted`` as its target, so
        an autoscaler that asks the scheduler (an
        :class:`~daskelastic.ElasticAdaptive`, or one polling
        ``/api/v1/adaptive_target``) scales the cluster up, and a cluster that
        an idle period scaled down comes back before the first round.  Where
        such an autoscaler asked recently, this waits up to ``timeout``
        seconds for the workers (``daskelastic.elastic.worker-wait``), then
        places the data on those there; workers that join later are taken
        in between rounds (see :class:`~daskelastic.elastic.ElasticController`).
        ``wanted`` is bounded by an ElasticAdaptive's ``maximum``.

        Parameters
        ----------
        wanted : int
            Workers the fit would use.
        timeout : float, optional
            Seconds to wait at most.

        Returns
        -------
        int
            The workers the fit will start on.
        """
        state = ask_scheduler("asking for the cluster's autoscaler", adaptive.elastic_state,
                              self.client)
        maximum = state.get("maximum")
        if maximum is not None and maximum != float("inf"):
            wanted = min(wanted, int(maximum))
        self.wanted = max(int(wanted), 1)
        self.publish()
        if state["adaptive"] and len(self._workers) < self.wanted:
            timeout = config.get("elastic.worker-wait") if timeout is None else timeout
            deadline = end = time.monotonic() + float(timeout)
            live = self.live_workers()
            while len(live) < self.wanted and time.monotonic() < end:
                time.sleep(0.1)
                count, live = len(live), self.live_workers()
                if len(live) > count:
                    # an autoscaler starts the workers it decided on together:
                    # once some came, a pause means the rest are not coming
                    end = min(deadline, time.monotonic() + _JOIN_SETTLE)
            self._workers = live[: self.wanted]
        return len(self._workers)

    def live_workers(self):
        """Addresses of the workers the scheduler knows now.

        Returns
        -------
        list of str
            The addresses, sorted; workers of the cluster that hold none of
            this fit's chunks included.
        """
        return scheduler_workers(self.client)

    def move_chunks(self, moves):
        """Move chunks, with their dual state, between workers.

        No round may be running (settle first).  The chunks moving from one
        source to one destination go together, as one block of rows
        (:class:`~daskelastic.solvers.RowBlock`): a task on the source takes
        them out of its solver and a task restricted to the destination,
        depending on the first, adds them.  A destination that was not a
        worker of the fit becomes one.  ``w`` is unchanged.

        Parameters
        ----------
        moves : list of (chunk_id, source, destination)
            The moves, e.g. from :func:`daskelastic.placement.plan_moves`.

        Raises
        ------
        RuntimeError
            When a round is running.
        daskelastic.driver.WorkersLost
            When a source or destination died: :meth:`recover` finds where
            the chunks are.
        """
        if not moves:
            return
        if self._pending:
            raise RuntimeError("cannot move chunks while a round runs")
        pairs = defaultdict(list)
        for cid, src, dst in moves:
            pairs[src, dst].append(cid)
        takes, puts = [], []
        for (src, dst), cids in pairs.items():
            tag = f"{self.fit_id}-{uuid.uuid4().hex[:8]}"
            self._touched.add(dst)
            take = self.client.submit(
                take_chunks, self.fit_id, self._epoch, cids, workers=[src],
                allow_other_workers=False, pure=False, key=f"daskelastic-take-{tag}")
            put = self.client.submit(
                put_chunks, self.fit_id, self.problem, self._epoch, take, workers=[dst],
                allow_other_workers=False, pure=False, key=f"daskelastic-put-{tag}")
            takes.append((src, take))
            puts.append((dst, put))
        try:
            # a put waits for its take's result, which dies with the source:
            # watch both ends
            gather_watching(self.client, puts, also_watch=[s for s, _ in takes])
        finally:
            self._cancel_tasks(takes + puts)
        for cid, src, dst in moves:
            self.placement[src].remove(cid)
            self.placement.setdefault(dst, []).append(cid)
            self.placement[dst].sort()
            if dst not in self._workers:
                self._workers.append(dst)
        self.placement = {w: c for w, c in self.placement.items() if c}
        self.publish()

    def add_workers(self, workers):
        """Make ``workers`` (joined during the fit) available for chunks.

        Nothing moves yet: :meth:`move_chunks` gives them chunks.

        Parameters
        ----------
        workers : iterable of str
            Addresses of the workers.
        """
        for w in workers:
            if w not in self._workers:
                self._workers.append(w)

    def release(self, workers, retire=False, target=None):
        """Stop using ``workers`` (holding no chunks); optionally retire them.

        Their actors are cancelled.  With ``retire`` they are retired through
        the scheduler, in the background (the fit goes on; :meth:`close`
        waits for it), once the scheduler has let go of those actors
        (:func:`~daskelastic.adaptive.retire_released`); their solver state
        goes with them.  Otherwise their solver state is dropped at once and
        they are published as released, for an
        :class:`~daskelastic.ElasticAdaptive` to close or for the cluster to
        reuse.

        Parameters
        ----------
        workers : iterable of str
            Addresses of the workers a scale-in lets go.
        retire : bool
            Retire them through the scheduler.
        target : int, optional
            The fit's target number of workers, published with them (see
            :meth:`publish`).

        Raises
        ------
        RuntimeError
            When a worker still holds chunks.
        """
        workers = list(workers)
        held = [w for w in workers if self.placement.get(w)]
        if held:
            raise RuntimeError(f"workers {held} still hold chunks: move them first")
        actor_keys = self._drop_actors(workers)
        for w in workers:
            if w in self._workers:
                self._workers.remove(w)
            self.placement.pop(w, None)
        self.released.extend(w for w in workers if w not in self.released)
        if target is not None:
            self.wanted = target   # a scale-in's target replaces what was asked for
        if retire:
            # in the background: retirement waits for the scheduler to close
            # the workers, which the next rounds (on other workers) need not do
            if self._retire_pool is None:
                self._retire_pool = ThreadPoolExecutor(1, thread_name_prefix="daskelastic-retire")
            self._retiring.append((workers, self._retire_pool.submit(
                adaptive.retire_released, self.client, workers, actor_keys)))
        else:
            # free their memory for other work, keeping a fence against changes
            # still in flight; a retired worker's goes with it (and close()
            # drops the fit everywhere).  On the workers' event loops: a worker
            # that died meanwhile is skipped
            ask_scheduler("dropping the released workers' state", self.client.run, drop_fit,
                          self.fit_id, workers=workers, on_error="ignore", released=True)
        self.publish(target)

    def wait_retired(self, timeout=60.0):
        """Wait for the retirements :meth:`release` started in the background.

        A retirement that fails, that the scheduler refuses (a worker still
        holding an actor, of this fit after
        :func:`~daskelastic.adaptive.retire_released` waited in vain, or of
        other work) or that does not end within ``timeout`` seconds leaves
        its workers running: a warning says so, the fit is not affected.

        Parameters
        ----------
        timeout : float
            Seconds to wait for each retirement.
        """
        retiring, self._retiring = self._retiring, []
        for workers, fut in retiring:
            try:
                try:
                    retired = fut.result(timeout=timeout)
                except OSError:
                    # the connection to the scheduler broke meanwhile: once more
                    self._await_connection()
                    retired = adaptive.retire_released(self.client, workers)
            except Exception as e:  # noqa: BLE001 - the workers keep running, that is all
                warnings.warn(f"retiring released workers failed ({type(e).__name__}: {e}); "
                              "they keep running", RuntimeWarning, stacklevel=2)
                continue
            refused = set(workers) - set(retired)
            if refused:     # and still running (one may have died meanwhile)
                try:
                    refused &= set(scheduler_workers(self.client))
                except ConnectionLost:
                    continue
            if refused:
                warnings.warn(f"the scheduler did not retire released workers "
                              f"{sorted(refused)}; they keep running", RuntimeWarning,
                              stacklevel=2)
        if self._retire_pool is not None:
            self._retire_pool.shutdown(wait=False, cancel_futures=True)
            self._retire_pool = None

    def _drop_actors(self, workers):
        """Cancel the actors on ``workers``; returns the keys of those cancelled."""
        keys = []
        for w in workers:
            self._actors.pop(w, None)
            fut = self._actor_futures.pop(w, None)
            if fut is not None:
                keys.append(fut.key)
                self._cancel_tasks([(w, fut)])
        return keys
