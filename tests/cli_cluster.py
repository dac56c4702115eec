"""A cluster of ``dask scheduler`` and ``dask worker`` processes that a test starts and stops.

As a user starts one from the command line: no ``LocalCluster``, no
``Cluster`` object, the scheduler and each worker a process of its own, all
on 127.0.0.1.  The processes run this interpreter (``python -m dask ...``),
so they import the daskelastic under test.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class CliCluster:
    """``dask scheduler`` and ``n_workers`` ``dask worker`` processes in ``directory``.

    Use as a context manager: every process started is stopped on exit,
    whatever the test did.  ``address`` is the scheduler's.
    """

    def __init__(self, directory, n_workers=2, *, memory_limit="2GB", timeout=60.0,
                 scheduler_env=None, preload=None):
        self.scheduler_env = dict(scheduler_env or {})
        self.preload = preload
        self.directory = Path(directory)
        self.n_workers = n_workers
        self.memory_limit = memory_limit
        self.timeout = timeout
        self.scheduler_file = self.directory / "scheduler.json"
        self.scheduler = None
        self.workers = []
        self.named = {}
        self._logs = []

    def __enter__(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            extra = ("--preload", self.preload) if self.preload else ()
            self.scheduler = self._start("scheduler", "--port", "0", "--dashboard-address",
                                         "127.0.0.1:0", *extra, env=self.scheduler_env)
            deadline = time.monotonic() + self.timeout
            while not self.scheduler_file.exists():
                if self.scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("dask scheduler did not start: "
                                       + self._log("scheduler"))
                time.sleep(0.1)
            for _ in range(self.n_workers):
                self.add_worker()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def address(self):
        """The scheduler's address, from its scheduler file."""
        return json.loads(self.scheduler_file.read_text())["address"]

    @property
    def http_address(self):
        """The scheduler's HTTP server (dashboard and ``/api/v1``), as ``http://host:port``."""
        info = json.loads(self.scheduler_file.read_text())
        return f"http://127.0.0.1:{info['services']['dashboard']}"

    def running_workers(self):
        """``{name: Popen}`` of the worker processes still running."""
        return {name: w for name, w in self.named.items() if w.poll() is None}

    def add_worker(self):
        """Start one single-threaded ``dask worker`` process (under its nanny); its Popen."""
        n = len(self.workers)
        worker = self._start(f"worker-{n}", "--scheduler-file", str(self.scheduler_file),
                             "--nthreads", "1", "--memory-limit", self.memory_limit,
                             "--no-dashboard", "--name", f"cli-{n}",
                             "--local-directory", str(self.directory / f"worker-{n}"),
                             command="worker")
        self.workers.append(worker)
        self.named[f"cli-{n}"] = worker
        return worker

    def stop_worker(self, worker, sig=signal.SIGTERM):
        """Stop one worker process as a pod is deleted (SIGTERM), and wait for it."""
        if worker.poll() is None:
            worker.send_signal(sig)
            try:
                worker.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def close(self):
        for worker in self.workers:
            self.stop_worker(worker)
        if self.scheduler is not None:
            self.stop_worker(self.scheduler)
        for log in self._logs:
            log.close()

    def _start(self, name, *args, command="scheduler", env=None):
        if command == "scheduler":
            args = ("--host", "127.0.0.1", "--scheduler-file", str(self.scheduler_file)) + args
        else:
            args = ("--host", "127.0.0.1") + args
        log = open(self.directory / f"{name}.log", "wb")   # closed in close()
        self._logs.append(log)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        return subprocess.Popen([sys.executable, "-m", "dask", command, *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=self.directory)

    def _log(self, name):
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""
