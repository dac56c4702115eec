"""Workers on a Dask cluster: chunks and dual state live on the workers.

Each worker holds, per running fit, a :class:`~daskelastic.solvers.ChunkSolver`
in a worker-local registry (:mod:`.worker`): its chunks, their dual variables
``α`` and the pending work of the last round.  Only ``w``, the settlement of
the previous round and a few numbers travel to a worker each round, and only
``Δw`` and a few numbers come back.

Rounds reach the workers as calls to one :class:`~.worker.RoundActor` per
worker (the default; sent straight from the client to the worker where it can
reach it, see ``daskelastic.actor-calls``) or, with
``daskelastic.round-transport: task``, as one task per worker per round named
``daskelastic-round-…`` in the dashboard's task stream.

- :mod:`.worker`: what runs on the workers;
- :mod:`.calls`: the driver's side of the transport;
- :mod:`.backend`: :class:`DaskBackend`, its state and the rounds; it is made of
- :mod:`.loading`: placing the data (in-memory chunks, blocks of dask input),
- :mod:`.elasticity`: moving chunks with their ``α``, joins, releasing workers,
- :mod:`.recovery`: recovering from lost workers and a lost scheduler connection.
"""

from .backend import DaskBackend
from .calls import scheduler_workers

__all__ = ["DaskBackend", "scheduler_workers"]
