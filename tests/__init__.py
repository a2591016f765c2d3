"""The test suite: what it checks.

Two tiers (``tests/tiers.py``).  ``python -m pytest`` runs the quick tier;
``python -m pytest --full`` (what ``.ci/run`` runs) every test.  A test is
slow, and left to ``--full``, when it or its fixtures use the real datasets,
a Dask cluster, a subprocess, torch training or crowd-kit itself -- read from
their code, never listed by name; ``@pytest.mark.quick`` keeps one in the
quick tier anyway: one real-data test per method family (bluebird's ds, glad
and mf, rte's spectral, bluebird/mv's golden bytes, ``crowdagg train`` on
music), a real ``python -m crowdagg aggregate`` process, and each module's
cheapest test where all of its tests are slow.  ``tests/crowdkit/`` mirrors
the crowd-kit surface's package: each module's comparisons with crowd-kit
itself (the oracle) are slow, its restated crowd-kit cases quick.  Registry-wide tests fit each
method with its declared ``quick_params``.  ``tests/test_tiers.py`` checks
all of this.

Across both tiers the suite runs, among others:

- a contract test over every registered method: posteriors are finite and sum
  to 1, every input task appears once and in input order, the same seed gives
  the same output; permuting the input rows changes no task's label and no
  posterior beyond 1e-12; tasks and workers without answers get the prior and
  a neutral (1/K) worker model;
- the numba kernels against slow reference implementations written from the
  equations (``tests/reference.py``: DS and one-coin MAP EM to 1e-9 relative,
  with an empty task and an empty worker), one DS iteration computed by hand
  (the 1e-10 floor included), posteriors that are the E-step of the returned
  parameters, and bit-identical results for 1 and 3 threads and any chunking;
- recovery on simulated crowds: on 6,000 tasks × 6 answers, DS's confusion
  matrices are within 0.02 mean absolute error of the truth and within 15% of
  the error of an oracle that knows the true labels; one-coin accuracies
  track the oracle's within 0.03; gold that contradicts the crowd moves the
  confusion matrices; single-answer workers stay near chance under one-coin;
  DS beats MV by > 20 points on Max-MIG's naive-majority and the MultiSPA demo
  scenarios and (as Max-MIG reports) loses to MV when workers copy each other;
- real data: DS accuracy ≥ the crowd-kit reference − 0.5 points on ten
  datasets; MV's vote shares give exactly the published ties-split accuracy
  (±0.0005) on thirteen, and its seeded tie-break lands within 4 standard
  deviations of it; DS and one-coin converge with the default settings on all
  fourteen categorical datasets;
- the crowd-kit-compatible classes against every behaviour crowd-kit's own
  tests check (step-by-step Dawid–Skene to 1e-11, loss histories, iteration
  counts, gold, ``initial_error``, skills policies, ties, empty input, names
  and layouts), and ``crowdagg.crowdkit`` against ``aggregate`` (majority vote
  and Wawa exactly, Dawid–Skene step for step within crowd-kit's 1e-10 floor);
- every hardening case: output targets (symlinks, FIFOs, /dev/null, sockets,
  /dev/fd, ``/dev/stdout >>log``, modes, temp placement), all-or-nothing
  commits, ``> /dev/full``, closed descriptors, SIGINT/SIGTERM in real
  processes, reproducible bytes, float round trips, malformed and mis-encoded
  inputs, platform exports, memory refusals, one-line Click errors;
- that ``crowdagg --help`` loads neither numba, pandas, scipy, tensorly nor torch.
- the README against the code (``tests/test_readme.py``): its Dask methods
  list is the registry's, every ``crowdagg`` command shown in README.md and
  benchmarks/README.md parses (subcommand, options, values, ``-p`` items of
  the method named), its anchor links resolve, and no output is named
  ``truth.*`` there or in the help texts.

Tests that race a real process (signals, pipes, FIFOs) wait for the state
they need -- handlers installed, blocked reading stdin, the signal held --
rather than for a time, and accept every documented outcome of a race they
cannot control, so a loaded machine makes them slower, never flaky.
"""
