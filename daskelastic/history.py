"""The record of one CoCoA+ round: what a fit's ``history_`` holds, one per round.

The driver (:func:`daskelastic.driver.run_cocoa`) builds a :class:`RoundEntry`
per round; the callback, the dashboard and ``history_`` see it as a plain
dict (:meth:`RoundEntry.as_dict`), which is what users read, plot and turn
into a DataFrame (:func:`daskelastic.monitoring.history_frame`).
"""

from dataclasses import dataclass, field, fields

__all__ = ["RoundEntry"]


@dataclass
class RoundEntry:
    """One round of a fit: its certificate, its workers and what was done after it.

    The parameters are kept as attributes of the same names.

    Parameters
    ----------
    round : int
        The round's id, from 0.
    time : float
        Seconds from the fit's start to the round's certificate (on the
        backend's clock: virtual seconds on a simulated cluster).
    duality_gap : float
        The relative duality gap ``(P − D) / |P|`` of the round-start iterate.
    gap, primal, dual : float
        The duality gap, and the primal and dual objectives it is made of.
    n_workers : int
        Workers holding chunks in the round.
    n_used, n_dropped, n_preempted : int
        Workers whose work was added, dropped, and added although stopped early.
    n_backup : int or None
        Backup workers of the round's plan.
    steps : int
        Coordinate steps of the added work.
    sigma : float
        The round's subproblem parameter σ′.
    step : float
        The step ``t`` the proposals were added with; 0 when none was (the
        last round's are discarded).
    outer : int
        Catalyst momentum steps so far.
    kappa : float
        Catalyst's proximal weight κ (0 without acceleration).
    worker_seconds, worker_cpu_seconds : dict
        ``{worker: seconds}`` of each worker's solver, wall and CPU (the CPU
        seconds are None on the simulated cluster).
    worker_arrival : dict
        ``{worker: seconds from the round's start to its result}``.
    worker_rows : dict
        ``{worker: rows held}``.
    worker_status : dict
        ``{worker: "used" | "preempted" | "dropped"}``.
    cut : float or None
        Seconds into the round when stragglers were stopped.
    round_seconds : float
        The round's duration.
    policy : str
        The straggler policy's name.
    policy_estimate : dict or None
        What the straggler policy estimated when it planned the round.
    cost : float or None
        Money spent on workers so far (None on backends without prices).
    events : list of dict
        The elastic operations of the round: workers lost while it ran,
        and scale-in, joins, rebalancing and lost workers after it.
    scaling : dict or None
        On an elastic backend, the scaling policy's decision after the round
        (``target``, ``reason`` and its estimates); None on the last round
        and elsewhere, and then not a key of :meth:`as_dict`.

    Examples
    --------
    >>> from daskelastic.history import RoundEntry
    >>> RoundEntry.keys()[:4]
    ['round', 'time', 'duality_gap', 'gap']
    """

    round: int
    time: float
    duality_gap: float
    gap: float
    primal: float
    dual: float
    n_workers: int
    n_used: int
    n_dropped: int
    n_preempted: int
    n_backup: int | None
    steps: int
    sigma: float
    step: float
    outer: int
    kappa: float
    worker_seconds: dict
    worker_cpu_seconds: dict
    worker_arrival: dict
    worker_rows: dict
    worker_status: dict
    cut: float | None
    round_seconds: float
    policy: str
    policy_estimate: dict | None
    cost: float | None
    events: list = field(default_factory=list)
    scaling: dict | None = None

    @classmethod
    def keys(cls):
        """The names of the entry's fields, in order.

        Returns
        -------
        list of str
            The field names.
        """
        return [f.name for f in fields(cls)]

    def as_dict(self):
        """The entry as ``history_`` holds it: a dict of its fields.

        ``scaling`` is left out when it is None.  The values are not copied.

        Returns
        -------
        dict
            ``{field: value}``, in the order of :meth:`keys`.
        """
        entry = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.scaling is None:
            del entry["scaling"]
        return entry
