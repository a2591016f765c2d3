"""Learning from crowds: a classifier trained end to end from features and noisy answers (``crowdagg train``).

The trainers are methods of their own kind (``"trainer"``: features +
answers -> a model), declared like the aggregators -- one
:class:`~crowdagg.methods.registry.Method` each in the family's
``__init__`` (:mod:`crowdagg.learning.methods`), found by
:data:`crowdagg.methods.registry.TRAINERS` -- so listing them, their help
and the checks of their parameters import no torch.  Torch is the optional
extra ``train`` (``pip install 'crowdagg[train]'``): a trainer's module
imports it; nothing else in crowdagg does.

The layout, by concern:

* :mod:`.features` -- the features file (``.npy``, ``.npz``, Parquet, CSV)
  and its rows aligned to the tasks (numpy and pandas, no torch);
* :mod:`.trainer` -- :class:`~crowdagg.learning.trainer.Trainer`, the base
  of every trainer: the services' loop (:func:`crowdagg.methods.loop.iterate`)
  with epochs as its iterations and the held-out noisy-answer likelihood as
  its objective and stop rule, plus batches, device, seed and model
  selection;
* :mod:`.networks` -- the classifiers (``linear``, ``mlp``, ``cnn``);
* :mod:`.confusion` -- the annotator confusion parameterisations (columns
  on the simplex) and their initialisations;
* :mod:`.model_file` -- the saved model (safetensors weights and a JSON
  header: loading executes no code);
* :mod:`.methods` -- one module per method, holding its loss and its
  confusion parameterisation (CrowdLayer, TraceReg, GeoCrowdNet, Raykar,
  the two-stage baselines).
"""
