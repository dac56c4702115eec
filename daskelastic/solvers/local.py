"""One worker's local solver: the visiting order, the round and the commit.

:class:`ChunkSolver` visits the rows of the chunks it holds (a
:class:`~daskelastic.solvers.store.ChunkStore`) in shuffled buckets, and keeps
a round's work pending until the driver commits or discards it (the worker's
half of the commit protocol).

A round (:meth:`ChunkSolver.solve`) runs the kernels of
:mod:`daskelastic.solvers._kernels` over the packed rows and returns a
:class:`LocalResult`.
"""

import collections
import time

import numpy as np
from numba import njit

from ..losses import LOGISTIC, SOFTMAX, dual_from_margins, intercept_sums, softmax_intercept_sums
from ._kernels import STOP_CHECK_EVERY, _scaled_dual_sums, gap_sums_chunk, sdca_chunk
from .logistic import _logistic_dual_change, logistic_gap_sums, logistic_start
from .store import ChunkStore, _array, sq_norm_sum


class LocalResult:
    """What one worker's local solver sends back after a round.

    Made by :meth:`ChunkSolver.solve`.  Every parameter is kept as an
    attribute of the same name, except ``sums``, which is split into
    ``loss_sum``, ``dual_sum`` and ``alpha_z_sum``.

    Parameters
    ----------
    dw : ndarray of shape (d + 1, m)
        ``Σ Δα_i x_i / (λ n)`` over the worker's visited samples.
    steps : int
        Coordinate steps done.
    sums : sequence of 3 float
        The loss, dual and ``α·x·w`` sums (see the attributes).
    n_rows : int
        Rows the worker holds.
    seconds : float
        Wall time of the solver call.
    stopped : bool
        Whether the stop flag ended the round early.
    budget : int
        Coordinate steps the round was given.
    stop_latency : float or None
        Seconds from the stop request to the solver's return (stopped rounds).
    dual_change : float
        ``Σ -(c_i ℓ_i)*(-(α_i + Δα_i)) − (-(c_i ℓ_i)*(-α_i))`` over the rows
        the round changed: with ``dw``, what the driver needs to evaluate the
        dual along the added proposals.
    cpu_seconds : float or None
        CPU time of the solver's thread during the call; below ``seconds``
        when the worker shared its core with others (None where not
        measured, as on the simulated cluster).
    intercept_sums : tuple of 2 ndarray or None
        With a free intercept, :func:`~daskelastic.losses.intercept_sums`
        (``(6, m)``) of the committed ``α`` over the rows held and
        ``Σ α_i x_i`` over those with ``α_i > 0`` (``(d, m)``); None otherwise.

    Attributes
    ----------
    loss_sum, dual_sum, alpha_z_sum : float
        ``Σ c_i ℓ_i(x_i·w)``, ``Σ -(c_i ℓ_i)*(-α_i)`` and ``Σ α_i x_i·w`` over
        every sample the worker holds, at the round-start ``w`` and committed
        ``α``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.solvers import LocalResult
    >>> result = LocalResult(np.zeros((4, 1)), steps=50, sums=(69.3, 0.0, 0.0),
    ...                      n_rows=100, seconds=0.002, stopped=True, budget=100)
    >>> result
    LocalResult(steps=50/100, n_rows=100, seconds=0.0020, stopped=True)
    >>> result.loss_sum
    69.3
    """

    __slots__ = ("dw", "steps", "loss_sum", "dual_sum", "alpha_z_sum", "n_rows",
                 "seconds", "stopped", "budget", "stop_latency", "dual_change",
                 "cpu_seconds", "intercept_sums")

    def __init__(self, dw, steps, sums, n_rows, seconds, stopped, budget,
                 stop_latency=None, dual_change=0.0, cpu_seconds=None,
                 intercept_sums=None):
        self.dw = dw
        self.steps = steps
        self.loss_sum, self.dual_sum, self.alpha_z_sum = (float(v) for v in sums)
        self.n_rows = n_rows
        self.seconds = seconds
        self.stopped = stopped
        self.budget = budget
        self.stop_latency = stop_latency
        self.dual_change = float(dual_change)
        self.cpu_seconds = cpu_seconds
        self.intercept_sums = intercept_sums

    def __repr__(self):
        return (f"LocalResult(steps={self.steps}/{self.budget}, n_rows={self.n_rows}, "
                f"seconds={self.seconds:.4f}, stopped={self.stopped})")


#: Rounds whose compute pace sets a slowed worker's usual speed.  Short, since
#: a step gets cheaper over the first rounds (fewer inner Newton steps as the
#: duals settle): a long window kept early rounds' pace and slowed a worker by
#: more than its factor for many rounds.
_PACE_WINDOW = 5

#: Rows per bucket of the visiting order (see :class:`ChunkSolver`).  Smaller
#: buckets approach a random permutation's convergence but lose the sweep's
#: memory throughput (the kernels prefetch each next bucket,
#: :mod:`daskelastic._prefetch`); with several workers the CoCoA+ aggregation,
#: not the visiting order, sets the number of rounds.  The measurements behind
#: 16 (``benchmarks/bench_bucket.py``) are in the docs' *Algorithms*, *The
#: local solver*, and *Benchmarks*, *The local solver*.
BUCKET_ROWS = 16


class ChunkSolver(ChunkStore):
    """One worker's SDCA rounds over the chunks it holds, and the pending round.

    The chunks, their dual state and their packing into one matrix in a
    random row order are the :class:`~daskelastic.solvers.store.ChunkStore`'s
    (the methods it adds are listed there).  Each round visits the packed
    rows bucket by bucket: the buckets (``BUCKET_ROWS`` consecutive packed
    rows) in a fresh random order, the rows of a bucket in sequence.  Three
    facts shape this (the docs' *Algorithms*, *The local solver*):

    - visiting chunk after chunk (a block order) converges several times
      slower than one permutation of all rows, because it drives the dual
      along the low-curvature direction that separates the blocks;
    - visiting rows in a fully random order costs several times more per
      step than a sequential sweep on a large sparse matrix (every step is a
      cache miss);
    - the bucket size trades the two: small buckets converge in fewer rounds,
      large ones run an epoch faster (``BUCKET_ROWS``).

    Shuffled packing plus bucketed visits gets both the convergence of a
    random permutation and nearly the memory throughput of a sweep.  The
    kernels read the packing's narrow column indices, and neither the values
    nor the sample weights when they are all 1: fewer bytes per visit.

    A round (:meth:`solve`) leaves its ``Δα`` pending; :meth:`commit` adds
    ``t·Δα`` to the dual state (``t`` the driver's step), :meth:`discard` forgets it.  This is the
    worker-side half of the commit protocol that lets the driver drop a late
    result without breaking ``w = Σ α_i x_i / (λ n)``.

    Parameters
    ----------
    loss : int
        Loss code (see ``daskelastic.losses.LOSSES``).
    n_targets : int
        Columns of ``Y`` (one-vs-rest classes or regression targets).
    intercept_scaling : float
        Value of the constant intercept feature; ``0`` for no intercept.
    seed : int
        Seed of the packing order.
    free_intercept : bool
        The intercept is not penalised: ``w``'s last row is the intercept
        ``b`` that the driver sets (``intercept_scaling`` must be 1), and
        each result carries :func:`~daskelastic.losses.intercept_sums` of the
        committed ``α`` (see :func:`daskelastic.objective.free_intercept_gap`).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.solvers import ChunkSolver
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> Y = np.sign(X[:, :1])
    >>> solver = ChunkSolver(loss=0, n_targets=1, intercept_scaling=1.0)  # logistic
    >>> solver.add_chunk(0, X[:60], Y[:60], np.ones(60))
    >>> solver.add_chunk(1, X[60:], Y[60:], np.ones(40))
    >>> solver.chunk_ids, solver.n_rows
    ([0, 1], 100)
    >>> result = solver.solve(np.zeros((4, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    >>> result.steps, result.stopped
    (100, False)
    >>> round(result.loss_sum, 4)   # 100 log 2: every margin is 0 at w = 0
    69.3147
    >>> solver.commit(0, gamma=1.0)
    >>> bool(np.allclose(solver.weighted_alpha_sum(3) * 1.0, result.dw))
    True
    """

    def __init__(self, loss, n_targets, intercept_scaling, seed=0, free_intercept=False):
        if free_intercept and intercept_scaling != 1.0:
            raise ValueError("a free intercept needs intercept_scaling=1, got "
                             f"{intercept_scaling}")
        super().__init__(n_targets, seed=seed)
        self.loss = loss
        self.intercept_scaling = float(intercept_scaling)
        self.free_intercept = bool(free_intercept)
        self.stop = np.zeros(1, dtype=np.int64)
        self.running = None    # id of the round being solved
        self._stop_round = None  # the round a stop was requested for
        self._stop_time = None
        self._step_seconds = collections.deque(maxlen=_PACE_WINDOW)  # compute s/step
        # The logistic dual values and logits of α + Δα of the pending round;
        # once committed with a step of 1, those of the committed α, keyed by
        # that α array (a repacking makes a new one): the next round then
        # takes no log before its kernel (see logistic_start)
        self._pending_duals = None
        self._alpha_duals = None   # (alpha, (D, U))

    @classmethod
    def for_problem(cls, problem, seed=0):
        """The solver of a :class:`~daskelastic.driver.Problem`'s chunks on one worker.

        Parameters
        ----------
        problem : daskelastic.driver.Problem
            The problem; its loss, targets and intercept set the solver's.
        seed : int
            Seed of the packing order.

        Returns
        -------
        ChunkSolver
            A solver holding no chunks yet.
        """
        return cls(problem.loss, problem.n_targets, problem.intercept_scaling, seed=seed,
                   free_intercept=problem.free_intercept)

    # -- one round ----------------------------------------------------------
    def solve(self, w, *, round_id, inv_lam_n, sigma, steps=None, seed=0,
              check_every=STOP_CHECK_EVERY, slowdown=1.0):
        """Run one round of local SDCA from ``w`` and return a :class:`LocalResult`.

        The visiting order is drawn from ``seed`` and ``round_id``; the loss
        and dual sums of the result cover every row held, at ``w`` and the
        committed ``α`` — also when the round was stopped early (the rows not
        visited get a gap-only pass).  The round's ``Δα`` stays pending until
        :meth:`commit` or :meth:`discard`.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            The round-start iterate.
        round_id : int
            Id of the round (for the pending work and stop requests).
        inv_lam_n : float
            ``1 / (λ n)`` of the problem the dual state belongs to.
        sigma : float
            Subproblem parameter ``σ′``.
        steps : int, optional
            Coordinate-step budget; default one pass over the rows held.
        seed : int
            Seed of the visiting order (with ``round_id``).
        check_every : int
            The stop flag is read every this many steps.
        slowdown : float
            ``slowdown > 1`` makes this worker a straggler on purpose (see
            :mod:`daskelastic.testing`): the budget runs in slices, and after
            each slice the solver spins until the slice has taken ``slowdown``
            times its compute time, or times the worker's usual pace if that
            is longer, ending at once when it is asked to stop.

        Returns
        -------
        LocalResult
            The proposed ``Δw``, the steps done and the gap sums.

        Raises
        ------
        RuntimeError
            When the work of an earlier round is still pending.
        """
        self._check_no_pending("start a round")
        self.running = round_id
        self.stop[0] = 1 if self._stop_round == round_id else 0
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        X, Y, sw, alpha = self._pack()
        work = self._work
        w = np.ascontiguousarray(w, dtype=np.float64)
        dw = np.zeros_like(w)
        dalpha = _array(work, "dalpha", alpha)
        dalpha.fill(0.0)
        sums = np.zeros(4)   # loss, dual, α·z at w; the dual change of Δα
        n = X.shape[0]
        budget = n if steps is None else int(steps)
        rng = np.random.default_rng([seed, round_id])
        visits = _visit_order(rng, n, budget, work=work)   # max(budget, n) row indices
        order = visits[:budget]
        done = 0
        dual = None
        margins = logits = None
        self._pending_duals = None
        if self.loss == LOGISTIC:   # the logs out of the kernel: see logistic_start
            known = self._alpha_duals
            if known is not None and known[0] is alpha:
                # (the round's dual change writes the other pair of arrays,
                # so they stay valid if the round is discarded)
                dual, logits = known[1]
            else:
                self._alpha_duals = None
                dual, logits = logistic_start(Y, sw, alpha, work)
            margins = _array(work, "margins", alpha)
        if budget > 0 and n > 0:
            def run(a, b):
                """Steps ``a`` to ``b`` of the round: ``(steps done, seconds they took)``."""
                t_slice = time.perf_counter()
                did = sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=self.loss,
                                 inv_lam_n=inv_lam_n, sigma=sigma,
                                 intercept_scaling=self.intercept_scaling,
                                 order=order[a:b], stop=self.stop, sums=sums,
                                 check_every=check_every, offset=int(a),
                                 margins=margins, logits=logits, indices=self._indices,
                                 unit_values=self._unit,
                                 unit_weights=self._unit_weights)
                compute = time.perf_counter() - t_slice
                if a == 0 and did > 0:
                    # the pace of this worker's compute, measured while the
                    # round's other solvers run too: the first slice (or the
                    # whole budget when the round is not slowed)
                    self._step_seconds.append(compute / did)
                return did, compute

            if slowdown > 1.0:
                # a straggler on purpose: the test instrumentation runs the steps
                from ..testing import _run_slowed

                done = _run_slowed(run, budget, slowdown, self.stop, self._step_seconds)
            else:
                done = run(0, budget)[0]
        if done < n:  # rows not visited yet: their gap terms in one sequential pass
            rest = np.sort(visits[done:n])
            gap_sums_chunk(X, Y, sw, alpha, w, loss=self.loss,
                           intercept_scaling=self.intercept_scaling, rows=rest, sums=sums,
                           margins=margins, indices=self._indices)
        if dual is not None:
            logistic_gap_sums(sw, margins, dual, sums, work)
        # added up by the kernels as they stepped, except the logistic loss's
        change = sums[3]
        if dual is not None and done:
            change, self._pending_duals = _logistic_dual_change(Y, sw, alpha, dalpha, dual, work)
        icpt_sums = self._intercept_sums(X, Y, sw, alpha, dual) if self.free_intercept \
            else None
        cpu = time.thread_time() - cpu0
        t_end = time.perf_counter()
        stopped = done < budget
        latency = t_end - self._stop_time if stopped and self._stop_time else None
        self.running = None
        self.pending = (round_id, dalpha)
        return LocalResult(dw, done, sums[:3], n, t_end - t0, stopped, budget,
                           stop_latency=latency, dual_change=change, cpu_seconds=cpu,
                           intercept_sums=icpt_sums)

    def _intercept_sums(self, X, Y, sw, alpha, dual=None):
        """:func:`~daskelastic.losses.intercept_sums` of the committed ``α``, and ``Σ α_i x_i``
        over the rows with ``α_i > 0``; for the softmax loss
        :func:`~daskelastic.losses.softmax_intercept_sums` and ``Σ x_i α_iᵀ`` over
        each class's rows (shape ``(K, d, K)``)."""
        m = self.n_targets
        if self.loss == SOFTMAX:
            out = np.zeros((m + 3, m))
            if X.shape[0] == 0:
                return out, None
            softmax_intercept_sums(Y, sw, alpha, out)
            labels = np.argmax(Y, axis=1)
            by_class = np.zeros((m, X.shape[1], m))
            for j in range(m):
                rows = np.flatnonzero(labels == j)
                if rows.size:
                    by_class[j] = np.asarray(X[rows].T @ alpha[rows])
            return out, by_class
        out = np.zeros((6, self.n_targets))
        if X.shape[0] == 0:
            return out, None   # (no rows: the driver adds nothing)
        known = np.empty((0, self.n_targets)) if dual is None else dual
        intercept_sums(self.loss, Y, sw, alpha, known, out)
        return out, np.asarray(X.T @ np.maximum(alpha, 0.0))

    def request_stop(self, round_id):
        """Ask round ``round_id`` to stop at its next check of the stop flag.

        Safe to call from another thread while :meth:`solve` runs (the numba
        kernels release the GIL), and before the round has started: the round
        then stops at once.  A request for another round is ignored.

        Parameters
        ----------
        round_id : int
            The round to stop.
        """
        self._stop_time = time.perf_counter()
        self._stop_round = round_id
        if self.running == round_id:
            self.stop[0] = 1

    def commit(self, round_id, gamma=1.0):
        """Add ``t·Δα`` of round ``round_id`` to the dual state.

        Parameters
        ----------
        round_id : int
            The pending round.
        gamma : float
            The step ``t`` the driver added the round's proposals with.

        Raises
        ------
        RuntimeError
            When round ``round_id`` has no pending work.
        """
        _, dalpha = self._take_pending(round_id)
        alpha = self._packed[3]
        duals, self._pending_duals = self._pending_duals, None
        # with a step of 1 the round's dual change took the dual values and
        # logits of the new α; else the next round takes them afresh
        self._alpha_duals = (alpha, duals) if gamma == 1.0 and duals is not None else None
        if gamma != 1.0:
            dalpha *= gamma   # in place: no row-sized temporary (see Workspace)
        alpha += dalpha

    def discard(self, round_id):
        """Forget the pending work of round ``round_id``.

        Parameters
        ----------
        round_id : int
            The pending round.

        Raises
        ------
        RuntimeError
            When round ``round_id`` has no pending work.
        """
        self._take_pending(round_id)
        self._pending_duals = None   # (a kept α's dual values stay valid)

    def start_duals(self, w, scales=()):
        """Set every row's committed ``α`` to the dual values that match ``w``.

        ``α_i = -c_i ℓ'(x_i·w)`` (:func:`~daskelastic.losses.dual_from_margins`):
        a warm start from earlier coefficients, the dual optimum when ``w``
        is the primal optimum of the same problem.  Any ``α`` so set is
        feasible, so the duality gap stays a certificate.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            Coefficients, the intercept coefficient in the last row.
        scales : sequence of float
            Scales ``s`` at which to sum the dual values of ``s·α``, for the
            caller to choose one (:meth:`scale_duals`).

        Returns
        -------
        sums : ndarray of shape (len(scales),)
            ``Σ -(c_i ℓ_i)*(-s α_i)`` for each scale (``-inf`` where ``s·α``
            leaves the conjugate's domain).
        alpha_sum : ndarray of shape (d + 1, m)
            :meth:`weighted_alpha_sum` of the new ``α``.

        Raises
        ------
        RuntimeError
            When a round's work is pending.
        """
        self._check_no_pending("set the dual state")
        scales = np.asarray(scales, dtype=np.float64)
        sums = np.zeros(scales.shape[0])
        w = np.asarray(w, dtype=np.float64)
        d = w.shape[0] - 1
        if self.n_rows == 0:
            return sums, self.weighted_alpha_sum(d)
        X, Y, sw, alpha = self._pack()
        Z = np.asarray(X @ w[:d]) + self.intercept_scaling * w[d]
        alpha[...] = dual_from_margins(self.loss, Y, sw, Z)
        self._alpha_duals = None   # the kept logistic dual values were of the old α
        _scaled_dual_sums(self.loss, Y, sw, alpha, scales, sums)
        return sums, self.weighted_alpha_sum(d)

    def scale_duals(self, scale):
        """Multiply the committed ``α`` by ``scale`` (after :meth:`start_duals`).

        Parameters
        ----------
        scale : float
            The factor; ``α`` must stay feasible (``start_duals`` says where).
        """
        self._check_no_pending("scale the dual state")
        if self.n_rows:
            self._pack()[3][...] *= scale
            self._alpha_duals = None

    def _take_pending(self, round_id):
        if self.pending is None or self.pending[0] != round_id:
            have = None if self.pending is None else self.pending[0]
            raise RuntimeError(f"no pending round {round_id} (pending: {have})")
        pending, self.pending = self.pending, None
        return pending

    def gap_sums(self, w):
        """Loss, dual and ``α·x·w`` sums over all rows at ``w`` and committed ``α``.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            The iterate.

        Returns
        -------
        tuple of 3 float
            ``Σ c_i ℓ_i(x_i·w)``, ``Σ -(c_i ℓ_i)*(-α_i)`` and ``Σ α_i x_i·w``
            (as in :class:`LocalResult`).
        """
        X, Y, sw, alpha = self._pack()
        sums = np.zeros(3)
        margins = np.empty_like(alpha) if self.loss == LOGISTIC else None
        gap_sums_chunk(X, Y, sw, alpha, np.ascontiguousarray(w, dtype=np.float64),
                       loss=self.loss, intercept_scaling=self.intercept_scaling,
                       rows=np.arange(X.shape[0], dtype=np.int64), sums=sums, margins=margins,
                       indices=self._indices)
        if margins is not None:
            logistic_gap_sums(sw, margins, logistic_start(Y, sw, alpha)[0], sums)
        return tuple(float(v) for v in sums)

    def prepare(self):
        """Pack the rows held now into the solver's layout (the next round would).

        A fit does it once its data is loaded, so that its first round is not
        longer than the others: a straggler policy would read the packing as
        a slow worker.
        """
        if self.n_rows:
            self._pack()

    def row_sq_norm_sum(self):
        """``Σ ‖x_i‖²`` over the rows held (without the intercept feature).

        Returns
        -------
        float
            The sum; ``0.0`` when no rows are held.
        """
        if self.n_rows == 0:
            return 0.0
        return sq_norm_sum(self._pack()[0])

    def weighted_alpha_sum(self, d):
        """``Σ α_i x_i`` over the rows held, with the committed ``α``.

        Parameters
        ----------
        d : int
            Number of features.

        Returns
        -------
        ndarray of shape (d + 1, m)
            The sum; its last row is the intercept feature's
            (``intercept_scaling · Σ α_i``).
        """
        out = np.zeros((d + 1, self.n_targets))
        if self.n_rows == 0:
            return out
        X, _, _, alpha = self._pack()
        out[:d] = X.T @ alpha
        out[d] = self.intercept_scaling * alpha.sum(axis=0)
        return out



def _visit_order(rng, n, steps, bucket=None, work=None):
    """Row indices for ``max(steps, n)`` steps: consecutive passes over ``range(n)``.

    Each pass visits buckets of ``bucket`` consecutive rows (default
    ``BUCKET_ROWS``, read at the call) in a random order, the rows of a bucket
    in sequence; every pass is a permutation.  The array is ``work``'s
    ``"visits"`` when a :class:`Workspace` is given.
    """
    bucket = BUCKET_ROWS if bucket is None else int(bucket)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    steps = max(int(steps), n)
    n_buckets = -(-n // bucket)
    out = (np.empty(steps, dtype=np.int64) if work is None
           else work.get("visits", (steps,), np.int64))
    pos = 0
    for _ in range(-(-steps // n)):
        pos = _fill_visits(rng.permutation(n_buckets), bucket, n, out, pos)
    return out


@njit(cache=True, nogil=True)
def _fill_visits(buckets, bucket, n, out, pos):
    """Write the rows of ``buckets`` (in turn; capped at ``n``) to ``out`` from ``pos``."""
    for b in buckets:
        for row in range(b * bucket, min(b * bucket + bucket, n)):
            if pos == out.shape[0]:
                return pos
            out[pos] = row
            pos += 1
    return pos

