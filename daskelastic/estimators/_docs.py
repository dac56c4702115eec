"""The parameter and attribute sections the estimators' docstrings share."""

from __future__ import annotations

_COMMON_HEAD = """
    tol : float, default=1e-4
        Stop when the relative duality gap ``(P(w) - D(α)) / P(w)`` is at most
        ``tol``; the gap bounds the relative primal suboptimality from above.
    max_iter : int, default=200
        Maximum number of CoCoA+ rounds (one local pass per worker each).
    fit_intercept : bool, default=True
        Fit an intercept."""


_SOLVER_DOC = """
    solver : {"auto", "gram", "cocoa"}, default="auto"
        ``"gram"``: one pass sums the rows' Gram matrix ``Σ c_i x_i x_iᵀ`` and
        correlations (block by block on the cluster for dask input, in this
        process for in-memory input), then coordinate descent on those
        ``d × d`` numbers runs to ``tol``, certified by the same duality gap
        (:mod:`daskelastic.gram`; Spark MLlib's ``"normal"`` solver).
        ``"cocoa"``: CoCoA+ rounds on the workers, with straggler policies,
        elastic scaling and the dashboard.  ``"auto"``: ``"gram"`` up to 256
        features, unless a simulated ``backend`` (a ``ClusterModel``) or a
        ``scaling_policy`` asks for rounds.  With ``"gram"`` the round
        parameters below (``n_workers`` to ``scaling_policy``) are unused and
        ``max_iter`` counts passes of coordinate descent."""

_NEWTON_SOLVER_DOC = """
    solver : {{"auto", "newton", "cocoa"}}, default="auto"
        ``"newton"``: damped Newton steps (:mod:`daskelastic.newton`): each
        pass over the rows sums their gradient and Hessian (block by block on
        the cluster where the data is on one, in this process otherwise), the
        driver solves by Cholesky and line-searches; a handful of passes
        reach ``tol``, each certified by the duality gap at the dual values
        ``α_i = −c_i ℓ'(z_i)`` of its margins.  ``"cocoa"``: CoCoA+ rounds on
        the workers, with straggler policies, elastic scaling and the
        dashboard's round timings.  ``"auto"``: ``"newton"`` where
        ``n_features × n_targets`` is at most ``daskelastic.newton.max-size``
        (512; ``n_targets`` the classes of a multiclass fit) and the penalty
        has no L1 part{extra}, unless a simulated ``backend`` (a
        ``ClusterModel``) or a ``scaling_policy`` asks for rounds.  With
        ``"newton"`` the round parameters below (``n_workers`` to
        ``scaling_policy``) are unused and ``max_iter`` counts Newton steps."""


def _intercept_doc(penalised):
    """The ``intercept_scaling`` and ``penalize_intercept`` sections, with the default
    of scikit-learn's counterpart: free (lbfgs, Ridge) or penalised (liblinear)."""
    if penalised:
        default = """
    penalize_intercept : bool, default=True
        Penalise the intercept like a coefficient: scikit-learn's LinearSVC
        problem (liblinear's, with ``intercept_scaling``).  ``False`` leaves
        it free (the squared hinge only; the hinge's loss has no curvature to
        move it by), with a duality gap that still certifies the fit and in
        more rounds (the user guide's *The intercept*)."""
    else:
        default = """
    penalize_intercept : bool, default=False
        Leave the intercept free (``False``, scikit-learn's problem, whose
        optimum the fit reaches, certified by its duality gap), or penalise
        it like a coefficient (``True``: liblinear's and Snap ML's problem,
        with ``intercept_scaling``), which takes fewer rounds for
        classification (the user guide's *The intercept*)."""
    return """
    intercept_scaling : float, default=1.0
        With ``penalize_intercept=True``: the intercept is the coefficient of
        a constant feature of this value, and larger values weaken its
        penalty.  Unused otherwise.""" + default + """  With an L1 part in
        the penalty the intercept is always free, as scikit-learn's ``saga``
        and ``Lasso`` leave it."""


#: the estimators whose scikit-learn counterparts leave the intercept free
_INTERCEPT_DOC = _intercept_doc(penalised=False)
#: LinearSVC's: liblinear penalises its intercept
_INTERCEPT_PENALISED_DOC = _intercept_doc(penalised=True)

_PENALTY_DOC = """
    penalty : {"l2", "l1", "elasticnet"}, default="l2"
        The penalty: ``½‖w‖²``, ``‖w‖₁`` or ``l1_ratio ‖w‖₁ + (1 − l1_ratio)
        ½‖w‖²`` (scikit-learn's; see the user guide's *Sparse models: L1 and
        elastic-net*).  With an L1 part, coefficients are exactly 0 where
        the optimum's are, and the intercept is free; not for the hinge
        loss.
    l1_ratio : float in [0, 1], optional
        The L1 part of ``penalty="elasticnet"``.  With ``"l1"`` or ``"l2"``
        a value that contradicts the penalty is ignored, with scikit-learn's
        ``UserWarning``."""

#: LogisticRegression's: scikit-learn ≥ 1.8 chooses the penalty by l1_ratio
_PENALTY_AUTO_DOC = """
    penalty : {"auto", "l2", "l1", "elasticnet"} or None, default="auto"
        The penalty: ``½‖w‖²``, ``‖w‖₁`` or ``l1_ratio ‖w‖₁ + (1 − l1_ratio)
        ½‖w‖²`` (scikit-learn's; see the user guide's *Sparse models: L1 and
        elastic-net*); None (or ``C=np.inf``): none, fitted by the Newton
        solver only (without a penalty there is no duality-gap certificate:
        the fit stops on the Newton decrement, and separable classes have
        no finite optimum).  ``"auto"`` chooses it by ``l1_ratio``, as
        scikit-learn 1.8 and later do: ``"l2"`` for None or 0, ``"l1"`` for
        1, ``"elasticnet"`` between.  With an L1 part, coefficients are
        exactly 0 where the optimum's are, and the intercept is free.
    l1_ratio : float in [0, 1], optional
        The L1 part of the penalty.  With ``penalty="l1"`` or ``"l2"`` a
        value that contradicts it is ignored, with scikit-learn's
        ``UserWarning``."""

_CLASS_WEIGHT_DOC = """
    class_weight : dict or "balanced", optional
        Weights of the classes, multiplied into the sample weights (see the
        user guide for how this differs from liblinear's one-vs-rest)."""

_COMMON_TAIL = """
    random_state : int, RandomState instance or None, default=None
        Seed of the order in which the local solvers visit samples.
    verbose : int, default=0
        ``1``: a progress bar with the duality gap, the workers and the time
        left; ``2``: a line per round.
    warm_start : bool, default=False
        Start from the previous call's coefficients instead of from zero: a
        refit after a change of the regularisation (a path of ``C`` or
        ``alpha`` values, say) then needs a fraction of the rounds of a cold
        fit.  The dual state starts at the values that match those
        coefficients, ``α_i = -c_i ℓ'(x_i·w)``, on the rows of this call's
        ``X`` (which may differ from the last's), so the duality gap still
        certifies the result.  The features and classes (or targets) must be
        the previous fit's.
    client : distributed.Client, optional
        Cluster to fit on; the current client by default.
    backend : {"auto", "dask", "inprocess"} or ClusterModel, default="auto"
        ``"dask"`` fits on ``client`` (or the current client, or an embedded
        ``LocalCluster`` started for the fit); ``"inprocess"`` fits in this
        process; ``"auto"`` is ``"dask"`` unless there is no client, the
        input is small (``daskelastic.embedded-threshold`` stored values) and
        in memory, and there is no ``scaling_policy``.  A
        :class:`~daskelastic.ClusterModel` fits in this process on that
        virtual cluster (``history_`` times are virtual seconds; ``n_workers``
        is the model's); see :func:`~daskelastic.simulate`.
    n_workers : int, optional
        Workers to use (all of the cluster's by default; the size of an
        embedded cluster; one for ``"inprocess"``).  More than the cluster
        has: a warning, and the fit uses those it has.
    chunks_per_worker : int, optional
        Row chunks per worker for numpy / scipy.sparse input
        (``daskelastic.chunks-per-worker``, 4, by default).  Dask input keeps
        its own row blocks as chunks.
    local_steps : int, optional
        Coordinate steps per worker per round; one pass over the worker's rows
        by default.
    gamma : float, default=1.0
        CoCoA+ aggregation parameter: the largest step ``w ← w + γ ΣΔw``.
    sigma : float, default=None
        CoCoA+ subproblem parameter ``σ′`` (how cautious each worker's local
        steps are), fixed; a value below ``γ K`` gives up the guarantee that
        every round raises the dual.  By default it adapts from the dual
        objective along the workers' summed proposals (for all losses but
        the hinge, where it stays at the safe ``γ K``): the first round and
        every other one after it use ``γ K``, the rounds between whatever the
        round before showed, and the proposals are added with the step that
        maximises a lower bound of the dual's gain, so that every round still
        raises the dual.  It usually takes fewer rounds than ``σ′ = K``, and
        on some tables more (the *Algorithms* page, *Adaptive σ′*, has the
        measurements).
    acceleration : "auto", "none", None or float, default="auto"
        Catalyst acceleration of the rounds: proximal problems with weight
        ``κ`` whose centres move with momentum.  On more than one worker it
        cuts the rounds several-fold on tables with many more rows than
        features; ``"auto"`` turns it on for two or more workers (for Ridge
        also on one, where plain SDCA needs hundreds of rounds once ``alpha``
        is small against ``‖x‖²``) and adapts ``κ`` from
        ``0.25 · sqrt(λ · mean ‖x_i‖²)``; logistic regression, and every
        classifier on one worker, starts without it and switches it on when
        the rounds slow down (at a large ``C``, say; see the *Algorithms*
        page).  A float fixes the factor and accelerates from the
        first round; ``"none"`` or None turns it off.
    straggler_policy : {"wait", "backup", "dynamic", "preempt"} or \
daskelastic.policies.StragglerPolicy, default="preempt"
        How a round treats slow workers (see the user guide):
        ``"wait"`` waits for all; ``"backup"`` uses the fastest ``K − b``
        and drops the rest; ``"dynamic"`` re-chooses ``b`` every round for
        the best estimated progress per second; ``"preempt"`` stops the
        workers still running once half are done (plus 20% of their compute
        time) and adds their partial work.  A name takes the policy's
        defaults (``"backup"``: ``b = 1``); a
        :class:`~daskelastic.policies.StragglerPolicy` instance sets the
        policy's own parameters, e.g.
        :class:`BackupPolicy(n_backup=2) <daskelastic.policies.BackupPolicy>`.
    scaling_policy : None, "convergence" or ScalingPolicy, default=None
        Elastic scale-in on a Dask or simulated cluster (see the user guide): with
        ``"convergence"`` the fit watches how fast ``log(gap)`` falls per
        second and, when that rate deteriorates, moves the chunks of some
        workers, with their dual state, to the others and lets those workers
        go.  None keeps the workers.  A
        :class:`~daskelastic.scaling.ScalingPolicy` instance sets the policy's
        own parameters, among them ``min_workers`` (never scale in below
        this many; default 1) and ``release_workers`` (what becomes of the
        workers a scale-in lets go: ``True`` retires them through the
        scheduler, ``False`` just stops using them, ``"auto"`` retires them
        from a cluster the fit started itself, leaves them to an
        :class:`~daskelastic.ElasticAdaptive` to close, and otherwise just
        stops using them), e.g. :class:`ConvergenceScalingPolicy(min_workers=2,
        release_workers=True) <daskelastic.ConvergenceScalingPolicy>`.
        With a policy, ``backend="auto"`` fits on Dask even small input (an
        embedded cluster when there is no client).
"""

#: ``n_iter_`` as each scikit-learn counterpart gives it
_N_ITER_ARRAY_DOC = """
    n_iter_ : ndarray of shape (1,), int32
        Committed CoCoA+ rounds, in scikit-learn's LogisticRegression's shape."""

_N_ITER_INT_DOC = """
    n_iter_ : int
        Committed CoCoA+ rounds (an int, as scikit-learn's)."""

_N_ITER_TARGETS_DOC = """
    n_iter_ : ndarray of shape (n_targets,), int32
        Committed CoCoA+ rounds, one entry per target as scikit-learn's
        iterative Ridge solvers give (the targets share the rounds, so the
        entries are equal); 1 after the Cholesky solver."""

_N_ITER_CD_DOC = """
    n_iter_ : int or list of int
        Committed CoCoA+ rounds, or passes of the Gram solver (see
        ``solver_``): an int for one target, a list with one (equal) entry
        per target otherwise, as scikit-learn's.
    dual_gap_ : float or ndarray of shape (n_targets,)
        The duality gap of the returned coefficients in the objective's own
        units, as scikit-learn's: an upper bound of their objective's excess
        over the optimum's.  An array for several targets, each entry the
        gap summed over all targets (the solvers fit them together), which
        bounds each target's own.  ``duality_gap_`` is the same gap relative
        to the objective."""

_ATTRS_DOC = """
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column names.
    feature_encoder_ : sklearn.compose.ColumnTransformer or None
        How the categorical columns of a dataframe ``X`` (string, ``object``
        or ``category`` dtype) were one-hot encoded; None when ``X`` had
        none.  Its ``get_feature_names_out()`` names the columns of
        ``coef_`` (``column=value`` for a category), whose number is then
        larger than ``n_features_in_``.  Categories not seen in ``fit`` set
        no feature at prediction.
    history_ : list of dict
        One entry per round, one more than ``n_iter_`` counts: the last is the round
        whose start met ``tol`` (or the one after ``max_iter`` rounds), whose
        proposals are discarded (its ``step`` is 0); ``duality_gap_`` is its
        gap.  The keys: ``round``, ``worker_rows`` (rows each worker holds),
        ``time`` (seconds since the fit
        began), ``duality_gap`` (relative, of the iterate the round started
        from), ``gap``, ``primal``, ``dual``, ``n_workers``, ``n_used``,
        ``n_dropped``, ``n_preempted``, ``n_backup``, ``steps``, ``sigma``
        and ``step`` (the round's ``σ′`` and the step its proposals were
        added with), ``outer`` and ``kappa`` (the acceleration's momentum
        steps and proximal
        weight), ``worker_seconds``, ``worker_cpu_seconds`` and
        ``worker_arrival`` (each worker's solver time, its solver's CPU time
        and the time its result arrived), ``worker_status``
        (``"used"``, ``"preempted"`` or ``"dropped"``), ``cut``,
        ``round_seconds``, ``policy``, ``policy_estimate`` and ``cost``
        (money spent on workers so far on a simulated cluster, else None).
    duality_gap_ : float
        Relative duality gap of the returned coefficients: a certificate that
        their objective is within this fraction of the optimum.
"""


_NEWTON_SOLVER_ATTR_DOC = """    solver_ : {"newton", "cocoa"}
        The solver the fit ran (see ``solver``).  After the Newton solver
        ``n_iter_`` counts Newton steps, and each ``history_`` entry (one per
        step) has the rounds' keys and ``decrement`` (the Newton decrement's
        estimate of the relative suboptimality), ``passes`` (over the data so
        far), ``certified`` and ``solver``.
"""

_SOLVER_ATTR_DOC = """    solver_ : {"gram", "cocoa"}
        The solver the fit ran (see ``solver``).  After the Gram solver
        ``n_iter_`` counts passes of coordinate descent, and ``history_`` has
        one entry per pass with the keys ``round``, ``time``, ``primal``,
        ``dual``, ``gap``, ``duality_gap``, ``n_workers`` and ``solver``.
"""
