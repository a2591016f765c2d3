"""Run by tests/engine/test_dask.py in a subprocess (so that a hang is a failed test, not a stuck suite): a fit on a
cluster whose scheduler is its own process, which is killed (SIGKILL) or frozen (SIGSTOP) at iteration 3 through the
progress callback.

    python scheduler_loss.py DIR SIGNAL api|cli

Prints one line of JSON: what the fit raised (api) or the CLI's exit code, stdout and stderr (cli), and the seconds
from the signal to the error.  The scheduler may stay silent 2 s (SCHEDULER_SILENCE) before the run is lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time


def main(directory: str, signame: str, via: str) -> None:
    import distributed
    import numpy as np

    import crowdagg.engine.dask as dask_engine

    began = time.monotonic()
    dask_engine.SCHEDULER_SILENCE = 2.0
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(4000), 5)
    worker = (np.repeat(rng.integers(0, 40, 4000), 5) + np.tile(np.arange(5), 4000)) % 40  # distinct in a task
    source = os.path.join(directory, "answers.csv")
    with open(source, "w") as fh:
        fh.write("task,worker,label\n")
        fh.writelines(f"t{t},w{w},{'ab'[y]}\n" for t, w, y in zip(task, worker, rng.integers(0, 2, len(task))))
    # The scheduler a process of its own (to be killed or frozen); its one worker a thread pool of this process
    # (started in a moment, crowdagg already imported).
    info = os.path.join(directory, "scheduler.json")
    if os.path.exists(info):  # an earlier run's: its address is dead
        os.remove(info)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", info],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid = scheduler.pid
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    worker = None
    sig = getattr(signal, signame)
    sent: list[float] = []

    def at_three(iteration: int, objective: float) -> None:
        if iteration == 3 and not sent:
            sent.append(time.monotonic())
            os.kill(pid, sig)

    async def start_worker() -> distributed.Worker:
        return await distributed.Worker(address, nthreads=1, dashboard=False)

    report: dict = {}
    try:  # the scheduler killed whatever happens
        while not os.path.exists(info) or not os.path.getsize(info):
            if scheduler.poll() is not None or time.monotonic() - began > 60:
                raise RuntimeError("the scheduler did not start")
            time.sleep(0.05)
        time.sleep(0.1)  # the file is written whole before the next look
        with open(info) as fh:
            address = json.load(fh)["address"]
        worker = asyncio.run_coroutine_threadsafe(start_worker(), loop).result(60)
        if via == "api":
            from crowdagg.methods.api import aggregate

            with distributed.Client(address) as client:
                try:
                    aggregate(source, "ds", engine="dask", client=client, max_iter=50, tol=0, callback=at_three)
                    report["raised"] = None
                except Exception as exc:  # noqa: BLE001 -- the test judges what came
                    report["raised"] = [type(exc).__name__, str(exc)]
                report["status"] = client.status
        else:
            from typer.testing import CliRunner

            import crowdagg.cli.pipeline as pipeline
            from crowdagg.cli import app

            pipeline.progress = lambda quiet: (at_three, lambda: None)  # the CLI's progress display: the signal
            out = os.path.join(directory, "out.csv")
            got = CliRunner().invoke(app, ["aggregate", source, "-m", "ds", "--max-iter", "50", "--tol", "0", "-o",
                                           out, "--engine", "dask", "--scheduler", address])
            report.update(exit_code=got.exit_code, stdout=got.stdout, stderr=got.stderr, written=os.path.exists(out))
        report["after_signal_s"] = time.monotonic() - sent[0] if sent else None
        report["address"] = address
    finally:
        scheduler.kill()
        scheduler.wait()
        # its scheduler gone, the worker says farewell to nobody: not waited for long
        if worker is not None:
            asyncio.run_coroutine_threadsafe(worker.close(timeout=1), loop)
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:4])
