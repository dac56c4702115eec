"""Placing a fit's data on the workers: in-memory chunks, or the blocks of dask input."""

import asyncio
import uuid

from ... import config
from ...driver import WorkersLost
from ...elastic import lost_event
from ...placement import assign_chunks
from .calls import (
    ask_scheduler,
    calls_direct,
    gather_watching,
    persisted_blocks,
    scheduler_workers,
)
from .worker import (
    BadBlock,
    load_block,
    load_chunks,
)

__all__ = []


class _Loading:
    """How :class:`~daskelastic.backends.dask.DaskBackend` places the data.

    The state it sets lives on the backend (see its ``__init__``).
    """

    def load_chunks(self, chunks):
        """Send in-memory chunks to the workers, balanced by rows.

        Where the actors' calls go straight to the workers (the default on a
        ``LocalCluster``, see
        ``calls.calls_direct``), each worker's
        chunks go with a call of its actor, which adds them to its solver and
        packs them (``_load_by_actors``); otherwise they are scattered to it
        (all workers at once; see ``_scatter_chunks``) and added by a task
        restricted to it.  The chunks are kept on the driver to rebuild those
        of a lost worker; a worker lost while they load has its chunks sent
        to the others.

        Parameters
        ----------
        chunks : list of daskelastic.placement.Chunk
            The training rows, cut into chunks (encoded targets and sample
            weights included).

        Raises
        ------
        Exception
            An error of a load task, raised again (without its traceback)
            once the backend is closed.
        """
        self._source = ("chunks", {c.chunk_id: c for c in chunks})
        self.chunk_sizes = {c.chunk_id: c.n_rows for c in chunks}
        plan = assign_chunks(self.chunk_sizes, self._workers)
        self._place_loaded(plan, lambda: self._send_chunks(plan))

    def _send_chunks(self, plan):
        """Start loading the driver's chunks as ``plan`` says; return ``[(worker, call)]``."""
        setting = config.get("actor-calls")
        self._touched.update(w for w, c in plan.items() if c)
        if self.transport == "actor" and all(
                calls_direct(self.client, a, setting) for a, c in plan.items() if c):
            return self._load_by_actors(plan)
        return self._scatter_chunks(plan)

    def _load_by_actors(self, plan):
        """Send each worker its chunks in a call of its actor, straight to it.

        The chunks travel as the call's arguments, to all workers at once, and
        the call adds and packs them: one message to each worker and one back
        once its actor is up, where a scatter (the data, then the scheduler
        told of it) and a load task (client → scheduler → worker → scheduler
        → client) take more round trips (see the docs' *Design notes*,
        *Chunks sent straight to the workers*).
        """
        by_id = self._source[1]
        targets = [a for a, c in plan.items() if c]
        self._ensure_actors(targets)
        return [(a, self._actors[a].load(self.problem, self._epoch,
                                         *[by_id[c] for c in plan[a]]))
                for a in targets]

    def _scatter_chunks(self, plan):
        """Send each worker its chunks, all workers at once, and submit their load tasks.

        The chunks go straight from the client to a worker it reaches (see
        ``calls.calls_direct``), not through
        the scheduler, which would receive and forward every byte (see the
        docs' *Design notes*, *Chunks sent straight to the workers*).
        """
        by_id = self._source[1]
        setting = config.get("actor-calls")
        targets = [addr for addr, cids in plan.items() if cids]

        async def scatter_all():
            return await asyncio.gather(*[
                self.client.scatter([by_id[c] for c in plan[addr]], workers=[addr],
                                    hash=False, asynchronous=True,
                                    direct=calls_direct(self.client, addr, setting))
                for addr in targets])

        try:
            scattered = self.client.sync(scatter_all) if targets else []
        except Exception as e:
            gone = [w for w in targets if w not in set(scheduler_workers(self.client))]
            if gone:
                raise WorkersLost(gone) from e
            raise
        loads = [(addr, self.client.submit(
            load_chunks, self.fit_id, self.problem, self._epoch, *data, workers=[addr],
            allow_other_workers=False, pure=False,
            key=f"daskelastic-load-{self.fit_id}-{addr}-{uuid.uuid4().hex[:6]}"))
            for addr, data in zip(targets, scattered)]
        del scattered
        return loads

    def load_dask(self, X, y, sample_weight, encoder, persisted=None):
        """Hold the blocks of dask arrays as chunks, each where it already lives.

        The arrays are persisted; row block ``i`` becomes chunk ``i``,
        preferably on a worker that already holds it (rows stay balanced),
        where a task validates ``X`` (2-d, finite, float), encodes ``y`` and
        ``sample_weight`` and adds the chunk to the worker's solver.  The
        arrays' task graphs are kept to re-read the blocks of a lost worker.

        Parameters
        ----------
        X : dask array of shape (n, d)
            Training data, in one column block; sparse blocks become CSR.
        y : dask array of shape (n,) or (n, m)
            Labels or targets, with the row chunks of ``X``.
        sample_weight : dask array of shape (n,) or None
            Sample weights, with the row chunks of ``X``; None for ones.
        encoder : daskelastic.targets.TargetEncoder
            Applied to each block of ``y`` and ``sample_weight`` on its worker.
        persisted : list of dask arrays, optional
            ``[X, y]`` (and ``sample_weight``) already persisted: their blocks
            are loaded, while the backend keeps only the arrays' graphs (to
            re-read the blocks of a lost worker).  The list is emptied once
            the loads are submitted, so that dask lets go of each block as
            soon as its load has run (the worker's solver holds the block's
            arrays then).

        Returns
        -------
        dict
            ``{worker: sorted list of chunk ids}``, with an empty list for a
            worker given no block.

        Raises
        ------
        Exception
            An error of a load task (e.g. the ``ValueError`` of a block with
            NaN or infinity, or of rows that do not match), raised again
            (without its traceback) once the backend is closed.
        """
        arrays = [X, y] + ([sample_weight] if sample_weight is not None else [])
        self._source = ("dask", (arrays, encoder))
        blocks = persisted_blocks(self.client, persisted or arrays)
        who_has = ask_scheduler("asking where the input is", self.client.who_has, blocks[0])
        sizes = {i: int(n) for i, n in enumerate(X.chunks[0])}
        self.chunk_sizes = sizes
        preferred = {i: list(who_has.get(f.key, ())) for i, f in enumerate(blocks[0])}
        plan = assign_chunks(sizes, self._workers, preferred=preferred)

        self._touched.update(w for w, c in plan.items() if c)
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                # a worker's rows are packed by the load task that completes
                # them (no prepare call: one round trip less)
                loads.append((addr, self.client.submit(
                    load_block, self.fit_id, self.problem, self._epoch, encoder, cid,
                    *[b[cid] for b in blocks], pack_with=list(cids),
                    workers=[addr], allow_other_workers=False,
                    pure=False, key=f"daskelastic-load-{self.fit_id}-{cid}")))
        # the chunks will live in the workers' solvers: drop dask's copies (no
        # reference to a block may stay in this frame, which an error's
        # traceback keeps, nor in the caller's list), so that each block is
        # released once its load has run, and a worker packs its rows while
        # dask holds none of them (see the user guide's *Memory*)
        del blocks
        if persisted is not None:
            persisted.clear()
        del persisted
        self._place_loaded(plan, lambda: loads)
        return {w: self.placement.get(w, []) for w in dict.fromkeys([*plan, *self.placement])}

    def _reread_blocks(self, plan):
        """Load the blocks of ``plan`` again from the dask arrays' graphs."""
        arrays, encoder = self._source[1]
        self._touched.update(w for w, c in plan.items() if c)
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                parts = self.client.compute([a.blocks[cid] for a in arrays])
                loads.append((addr, self.client.submit(
                    load_block, self.fit_id, self.problem, self._epoch, encoder, cid, *parts,
                    workers=[addr], allow_other_workers=False, pure=False,
                    key=f"daskelastic-reload-{self.fit_id}-{cid}-{uuid.uuid4().hex[:6]}")))
                del parts
        return loads

    def _place_loaded(self, plan, start):
        """Load the data as ``plan`` says (``start()`` returns the load calls); publish.

        A worker lost meanwhile is recovered from (its chunks go to the live
        workers).  Any other error of a load closes the backend and is raised
        again.
        """
        if self.transport == "actor":
            # the actors start while the chunks load, instead of a round trip
            # of their own before the first round
            self._submit_actors([w for w, c in plan.items() if c])
        error = None
        try:
            try:
                loads = start()
                try:
                    sums = gather_watching(self.client, loads)
                finally:
                    self._cancel_tasks(loads)
                    del loads
                self._check_blocks(plan, sums)
                self._sq_norm_sum = float(sum(sums))
                self.placement = {w: sorted(c) for w, c in plan.items() if c}
                # direct actor loads do not pass the scheduler: a cut link to
                # it may first show here (ConnectionLost), and is recovered
                # from as a loss during the load
                self.publish()
            except WorkersLost as lost:
                # the rows' norms are summed again when asked for
                self.placement = {w: sorted(c) for w, c in plan.items() if c}
                self._sq_norm_sum = None
                known = len(self.lost)
                reread = self.recover(lost.workers)
                self._events.append(dict(lost_event(self.lost[known:], reread, None),
                                         **{"while": "loading"}))
        except Exception as e:  # noqa: BLE001 - re-raised below, without references
            error = e
        if error is not None:
            self.close()
            # a traceback would keep the frames, and with them the input's
            # futures, alive: raise the error without it
            raise error.with_traceback(None) from None

    def _check_blocks(self, plan, results):
        """Raise the ``ValueError`` of the first block a load refused (see ``BadBlock``).

        ``results`` are the loads' of dask input, one per block in ``plan``'s order.
        """
        if self._source[0] != "dask":
            return
        bad = [(cid, r) for cid, r in zip([c for cids in plan.values() for c in cids], results)
               if isinstance(r, BadBlock)]
        if bad:
            cid, error = min(bad)
            start = sum(self.chunk_sizes[c] for c in self.chunk_sizes if c < cid)
            raise ValueError(f"{error.message} (in row block {cid}: rows {start:,} to "
                             f"{start + self.chunk_sizes[cid] - 1:,} of the input)")

    def _cancel_tasks(self, calls):
        """Cancel the Dask futures among ``[(worker, call)]`` (their results are read)."""
        futures = [c for _, c in calls if not hasattr(c, "set_result")]
        if futures:
            try:
                self.client.cancel(futures, force=True)
            except OSError:
                pass   # a broken connection to the scheduler released them already

    def take_events(self):
        """The ``worker_lost`` events of workers lost while the data loaded.

        Returns
        -------
        list of dict
            The events not taken yet (see :meth:`Backend.take_events
            <daskelastic.backends.base.Backend.take_events>`).
        """
        events, self._events = self._events, []
        return events
