"""Learning from crowds: a classifier trained end to end from features and noisy answers (``crowdagg train``).

The trainers are methods of their own kind (``"trainer"``: features +
answers -> a model), declared like the aggregators -- one
:class:`~crowdagg.methods.registry.Method` each in its family's
``__init__`` under :mod:`crowdagg.learning.methods` (``coupled/``,
``em/``, ``twostage/``, ...), found by
:data:`crowdagg.methods.registry.TRAINERS` -- so listing them, their help
and the checks of their parameters import no torch.  Torch is the optional
extra ``train`` (``pip install 'crowdagg[train]'``): a trainer's module
imports it; nothing else in crowdagg does.

The layout, by concern:

* :mod:`.api` -- ``crowdagg.train(features, answers, method=...,
  network=...)``, the library's one call, returning a
  :class:`~crowdagg.learning.model.TrainedModel`;
* :mod:`.features` -- the features file (``.npy``, ``.npz``, Parquet, CSV)
  and its rows aligned to the tasks (numpy and pandas, no torch);
* :mod:`.trainer` -- the services every trainer is built on:
  :class:`~crowdagg.learning.trainer.Trainer` (the loop with epochs as its
  iterations, model selection, patience), the
  :class:`~crowdagg.learning.trainer.TrainContext` handed to every hook,
  :class:`~crowdagg.learning.trainer.BatchPolicy`, the declared module
  groups' optimiser settings, the held-out split and the canonical order
  that makes a fit independent of the input's row order;
* :mod:`.soft_targets` -- a classifier fit to per-task soft targets (the EM
  and two-stage trainers);
* :mod:`.networks` -- the network factory: ``linear``, ``mlp``, ``cnn``, or
  any ``torch.nn.Module``;
* :mod:`.confusion` -- the annotator confusion parameterisations (columns
  on the simplex) and their initialisations;
* :mod:`.model` / :mod:`.model_file` -- the trained model and its file
  (safetensors weights and a JSON header: loading executes no code);
* :mod:`.methods` -- one package per family, one module per method, holding
  its loss and its parameterisation (CrowdLayer, TraceReg, GeoCrowdNet,
  Raykar, the two-stage baselines).
"""
