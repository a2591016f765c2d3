"""Graph inference on the worker--task graph: belief propagation (:mod:`.bp`), mean-field variational Bayes
(:mod:`.mf`) and Karger--Oh--Shah message passing (:mod:`.kos`).

The answers form a bipartite graph (tasks on one side, workers on the
other, one edge per answer).  These methods pass messages along its edges
(ALGORITHMS.md §6; Liu, Peng & Ihler 2012; Ok et al. 2016; Karger, Oh &
Shah 2011/2014; Kim, Cho, Kim & Ok 2022): the task side in task-ordered
blocks of the engine's grid, the worker side in worker-ordered blocks
(:func:`crowdagg.engine.grid.worker_grid`), the kernels in
:mod:`crowdagg.kernels`.  Messages are per-edge outputs that stay with
their block; BP and KOS cross from one side to the other through the
answers' worker order, so they run on the local engine only, while MF's
statistics are sums over tasks (Dawid--Skene's) and run on Dask too.

This ``__init__`` holds the family's declarations only (standard library;
:mod:`crowdagg.methods.registry` imports it to list the methods, never the
method modules).
"""

from ..registry import Method  # noqa: F401  (the methods' declarations below use it)

DECLARATIONS: tuple = ()
