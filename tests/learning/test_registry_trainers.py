"""The trainers in the registry: listing them imports no torch, a missing torch names the extra to install,
and an aggregator's name asked of the trainers (or the reverse) says which command takes it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from crowdagg.errors import UsageError
from crowdagg.methods.registry import METHODS, TRAINERS, UnknownMethod, get, get_method, get_trainer

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install 'crowdagg[train]'"


def run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this checkout (what it imports is its own)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_import_and_listing_the_trainers_import_no_torch():
    out = run_python("""
        import json, sys
        import crowdagg
        from crowdagg.methods.registry import TRAINERS, get_trainer
        names = list(TRAINERS)
        spec = get_trainer("crowdlayer")
        described = [spec.summary, spec.reference, [p.name for p in spec.params]]
        crowdagg.load_model  # the library's entry resolves without importing torch
        from crowdagg.learning import model_file, model
        print(json.dumps({"names": names, "heavy": sorted(m for m in sys.modules
                                                          if m.split('.')[0] in ("torch", "safetensors"))}))
    """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert "crowdlayer" in got["names"]
    assert got["heavy"] == []


def test_every_trainer_is_declared_with_the_train_extra():
    assert len(TRAINERS) >= 1
    for name in TRAINERS:
        spec = get_trainer(name)
        assert spec.kind == "trainer" and spec.requires == "train", name
        assert name not in METHODS


def test_a_trainer_without_torch_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name.split(".")[0] == "torch" else real(name, *args))
    with pytest.raises(UsageError, match=r"needs the optional extra 'train' \(torch not installed\): "
                                         + INSTALL.replace("[", r"\[").replace("]", r"\]")):
        get_trainer("crowdlayer").load()


def test_a_trainer_with_torch_hidden_in_a_fresh_interpreter_names_the_extra():
    out = run_python("""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        from crowdagg.errors import UsageError
        from crowdagg.methods.registry import TRAINERS, get_trainer
        print(sorted(TRAINERS) != [])
        try:
            get_trainer("crowdlayer").load()
        except UsageError as exc:
            print(exc)
    """)
    assert out.returncode == 0, out.stderr
    listed, message = out.stdout.strip().splitlines()
    assert listed == "True"  # listing works without torch
    assert "'crowdlayer'" in message and INSTALL in message


def test_an_aggregators_name_asked_of_the_trainers_says_which_command_takes_it():
    with pytest.raises(UnknownMethod, match=r"'ds' is an aggregation method \(crowdagg aggregate --method ds\), "
                                            r"not a trainer; trainers: .*crowdlayer"):
        get_trainer("ds")
    with pytest.raises(UnknownMethod, match=r"'crowdlayer' is a trainer \(crowdagg train --method crowdlayer\), "
                                            r"not an aggregation method; aggregation methods: .*ds"):
        get("crowdlayer")
    with pytest.raises(UnknownMethod, match="'crowdlayer' is a trainer"):
        get_method("crowdlayer")
    with pytest.raises(UnknownMethod, match="unknown method 'nope'; valid methods: .*crowdlayer"):
        get_trainer("nope")
    assert "crowdlayer" not in METHODS and "ds" not in TRAINERS


@pytest.mark.quick  # two epochs of an 8-unit network on 60 tasks: the cost of a few forward passes
@pytest.mark.parametrize("name", list(TRAINERS))
def test_every_trainer_fits_with_its_quick_settings(name):
    """Each trainer, with its declared quick settings (:attr:`Method.quick_params`): a model of the declared size,
    posteriors over the classes for every task, the declared epochs run, the same bytes from the same seed."""
    from crowdagg.simulate import simulate
    from crowdagg.simulate.features import gaussian_features

    crowd = simulate(n_tasks=60, n_workers=6, n_classes=3, per_task=3, seed=1)
    data = crowd.to_annotations()
    order = np.array([int(t[1:]) for t in data.task_names])  # simulated task names are t<index>
    x = gaussian_features(crowd.truth, 3, dim=4, separation=3.0, seed=2)[order]
    quick = TRAINERS[name].quick_params
    assert {"epochs", "hidden"} <= set(quick)
    fit = get_trainer(name).load()(seed=0, **quick).fit(data, x)
    assert fit.posteriors.shape == (60, 3) and np.allclose(fit.posteriors.sum(axis=1), 1.0)
    assert fit.labels.shape == (60,) and set(fit.labels.tolist()) <= {0, 1, 2}
    assert fit.n_iter <= quick["epochs"] and len(fit.objective) == fit.n_iter
    assert fit.model_params["model"].predict_proba(x).shape == (60, 3)
    again = get_trainer(name).load()(seed=0, **quick).fit(data, x)
    assert np.array_equal(again.posteriors, fit.posteriors)
