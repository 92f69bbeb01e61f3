"""Worker processes for the fuzz campaigns: one job at a time each, killed and replaced when one
dies or passes the time limit (a hang in isl or in a kernel must not stop a campaign).

    pool = WorkerPool(worker, (cache_root,), n=2, timeout=60)
    pool.run(seeds, send=lambda seed: seed, on_result=handle)   # handle(job, reply, failure, seconds)
    pool.close()

``worker(conn, *args)`` loops on ``conn.recv()`` until it receives None and answers each message
with ``conn.send(reply)``.  Workers are started with the 'spawn' method (no state inherited from
the parent).
"""
from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import wait
from typing import Any, Callable, Iterable, Optional


class WorkerPool:
    def __init__(self, target: Callable, args: tuple, n: int, timeout: float):
        self.ctx = mp.get_context("spawn")
        self.target, self.args, self.timeout = target, args, timeout
        self.slots = [self._start() for _ in range(n)]

    def _start(self) -> dict:
        a, b = self.ctx.Pipe()
        p = self.ctx.Process(target=self.target, args=(b, *self.args), daemon=True)
        p.start()
        return {"proc": p, "conn": a, "job": None, "busy": False, "t0": 0.0}

    def run(self, jobs: Iterable, send: Callable[[Any], Any],
            on_result: Callable[[Any, Any, Optional[str], float], None]) -> None:
        """Run every job (pulled lazily); ``on_result(job, reply, failure, seconds)`` gets the worker's
        reply, or None and ``failure`` ('worker died (exit code N)' or 'no answer in T s')."""
        it = iter(jobs)
        live = True
        while True:
            for s in self.slots:
                if not s["busy"] and live:
                    try:
                        s["job"] = next(it)
                    except StopIteration:
                        live = False
                        break
                    s["busy"], s["t0"] = True, time.time()
                    s["conn"].send(send(s["job"]))
            busy = [s for s in self.slots if s["busy"]]
            if not busy:
                return
            ready = wait([s["conn"] for s in busy], timeout=0.5)
            for s in busy:
                seconds = time.time() - s["t0"]
                if s["conn"] in ready:
                    try:
                        reply, failure = s["conn"].recv(), None
                    except EOFError:
                        reply, failure = None, f"worker died (exit code {s['proc'].exitcode})"
                        self._replace(s)
                elif seconds > self.timeout:
                    reply, failure = None, f"no answer in {self.timeout} s"
                    self._replace(s)
                else:
                    continue
                s["busy"] = False
                on_result(s["job"], reply, failure, seconds)

    def _replace(self, s: dict) -> None:
        s["proc"].kill()
        s["proc"].join()
        fresh = self._start()
        s.update(proc=fresh["proc"], conn=fresh["conn"])

    def close(self) -> None:
        for s in self.slots:
            try:
                s["conn"].send(None)
            except OSError:
                pass
            s["proc"].join(timeout=5)
            if s["proc"].is_alive():
                s["proc"].kill()
