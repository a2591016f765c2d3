"""The latent E-step (crowdagg.methods.blocks.latent_posterior) against the numpy Bayes rule it replaced.

A simulated crowd of 1M answers (200,000 tasks × 5, 1,000 workers, K = 3),
a random classifier output as each task's prior and random confusions.
Printed: the best of 7 runs of the numpy rule the trainers used before
(gather the answers' log-confusion rows, ``np.add.reduceat`` by task, a
row softmax), and of ``latent_posterior`` on 1 and 2 threads -- its square
case (the same posteriors to 1e-10), and two latent states a class with
the class posterior, draws and the M-step's counts.  The draws' name keys
are hashed on the first call and kept with the engine's partition, so the
timed calls do not hash.

    python benchmarks/bench_latent.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from crowdagg.core import threads
from crowdagg.engine import LocalEngine
from crowdagg.methods.blocks import PROB_FLOOR, latent_posterior
from crowdagg.simulate import simulate


def best(f: Callable[[], Any], n: int = 7) -> float:
    """The fastest of ``n`` runs after a warm-up, in ms."""
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def main() -> None:
    data = simulate(200_000, 1_000, 3, 5, seed=1).to_annotations()
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=data.n_tasks)
    confusion = rng.dirichlet(np.ones(3), size=(data.n_workers, 3))  # [worker, true, observed]

    def numpy_rule() -> np.ndarray:
        log_a = np.log(np.maximum(confusion, PROB_FLOOR))
        score = np.log(np.maximum(proba, PROB_FLOOR))
        per_answer = log_a[data.worker, :, data.label]
        has = np.flatnonzero(np.diff(data.task_ptr) > 0)
        score[has] += np.add.reduceat(per_answer, data.task_ptr[has], axis=0)
        score -= score.max(axis=1, keepdims=True)
        post = np.exp(score)
        return post / post.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    log_table = np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1)
    log_prior = np.log(np.maximum(proba, PROB_FLOOR))
    latent_class = np.array([0, 0, 1, 1, 2, 2])
    table6, prior6 = log_table[:, :, latent_class], log_prior[:, latent_class] - np.log(2)
    print(f"{data.n_answers:,} answers, {data.n_tasks:,} tasks, {data.n_workers:,} workers, K = 3")
    print(f"numpy Bayes rule: {best(numpy_rule):.1f} ms")
    reference = numpy_rule()
    for n in (1, 2):
        with threads.use_threads(n):
            engine = LocalEngine(data)
            out = latent_posterior(data, log_table, log_prior, engine=engine)
            assert np.allclose(out.classes, reference, rtol=1e-10, atol=1e-13)
            square = best(lambda e=engine: latent_posterior(data, log_table, log_prior, engine=e))
            subtypes = best(lambda e=engine: latent_posterior(data, table6, prior6, latent_class, engine=e, draw_seed=1,
                                                       counts="posterior"))
            print(f"latent_posterior, {n} thread(s), {engine.n_blocks} blocks: {square:.1f} ms; K_latent = 6 with "
                  f"the class posterior, draws and counts: {subtypes:.1f} ms")


if __name__ == "__main__":
    main()
