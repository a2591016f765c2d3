"""The trainers, by family: one package each (its methods' modules and their declarations), as for the aggregators.

Each family package (``coupled/``: a confusion per annotator on the
classifier's output, trained on the answers' cross-entropy; ``em/``: EM with
the classifier as the prior of the true label; ``twostage/``: aggregate,
then train) declares its methods in its ``__init__`` (standard library only:
:data:`crowdagg.methods.registry.TRAINERS` imports the ``__init__`` files to
list the trainers, never the method modules, which import torch).  This
``__init__`` holds what the families share: the parameters every trainer
takes and their cheap test settings.

Every trainer takes :data:`TRAIN_PARAMS` (the classifier, the optimiser,
the batches, the device, the seed and the held-out answers of model
selection; the ``crowdagg train`` flags ``--model``, ``--epochs`` ...) and
its own parameters (``-p name=value``).
"""

from ...methods.registry import SEED, Param

#: The parameters every trainer takes (``crowdagg train`` has a flag for each).
TRAIN_PARAMS = (
    SEED,
    Param("model", "choice", "mlp", "the classifier: linear (softmax regression), mlp (one hidden ReLU layer with "
          "dropout: the FCNN of CrowdLayer and GeoCrowdNet on LabelMe), cnn (4 conv layers, for N×C×H×W images)",
          choices=("linear", "mlp", "cnn")),
    Param("hidden", int, 128, "units of the mlp's hidden layer (channels of the cnn's last layers)", 1, 65536),
    Param("dropout", float, 0.5, "dropout before the mlp's output layer", 0.0, 0.95),
    Param("epochs", int, 100, "passes over the training tasks (the loop's iterations)", 1, 100000),
    Param("batch_size", int, 64, "tasks per minibatch (all their training answers come with them)", 1, 10**7),
    Param("lr", float, 1e-3, "Adam's learning rate", 1e-8, 10.0),
    Param("weight_decay", float, 1e-4, "Adam's weight decay (L2) on the classifier", 0.0, 1.0),
    Param("device", "device", "auto", "where to train: auto (CUDA when available), cpu, cuda, cuda:N; mixed "
          "precision on CUDA"),
    Param("val_fraction", float, 0.1, "share of the answers held out for model selection: the epoch with the best "
          "held-out objective is kept -- the noisy answers' likelihood, or the method's own objective where it has "
          "one (maxmig: -MIG) -- (0: none held out, the last epoch is kept)", 0.0, 0.9),
    Param("patience", int, 20, "stop when the held-out model-selection objective has not improved for this many "
          "epochs (0: run every epoch; the best epoch is kept either way)", 0, 100000),
)

#: Every trainer's cheap settings for tests (:attr:`Method.quick_params`): two epochs of a small network.
QUICK = {"epochs": 2, "hidden": 8, "batch_size": 32, "device": "cpu"}

#: The generative model the confusion-based trainers share (a declaration's ``model`` starts with it).
DS_FEATURES = ("y_n ~ Cat(f_θ(x_n)); worker m answers ~ Cat(A_m[:, y_n]) independently (A_m: columns on the "
                "simplex, A_m[answer, true]).")
