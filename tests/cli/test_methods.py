"""``crowdagg methods``: every method's kind, engines, gold and saved models, from the declarations."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.methods.registry import METHODS, TRAINERS


def test_aggregate_help_lists_the_p_parameters_with_their_kinds():
    helped = CliRunner().invoke(app, ["aggregate", "--help"], terminal_width=400)
    text = " ".join(helped.stdout.split())
    # each parameter once, with the methods that declare it (more may join: GLAD declares init) and its kind; a name may hold a hyphen (ds-clust)
    assert "A parameter of the method (repeatable): n_init (ds, onecoin" in text
    assert re.search(r"n_init \(ds, onecoin[\w, -]*: int, 1 \.\. 1000\)", text)
    assert re.search(r"init \(ds, onecoin[\w, -]*: method, soft-vote, hard-vote or a method\)", text)
    assert "`crowdagg methods NAME` explains each, e.g. -p n_init=5." in text


def test_methods_lists_kinds_engines_gold_and_saved_models():
    runner = CliRunner()
    plain = runner.invoke(app, ["methods"])
    listed = {**METHODS, **TRAINERS}  # the aggregators, then the trainers, aligned together
    width = max(map(len, listed))
    assert plain.exit_code == 0 and plain.stderr == ""
    assert plain.stdout == "".join(f"{n:<{width}}  {m.summary}\n" for n, m in listed.items())
    table = runner.invoke(app, ["methods", "--format", "csv"]).stdout.splitlines()
    assert table[0] == "method,class,summary,kind,engines,gold,saved_models,requires"
    rows = {r.split(",")[0]: r for r in table[1:]}
    assert rows["ds"].startswith("ds,DawidSkene,") and rows["ds"].endswith(',categorical,"local,dask",true,true,')
    assert rows["mv"].endswith(',categorical,"local,dask",false,false,')
    jsonl = runner.invoke(app, ["methods", "--format", "jsonl"]).stdout.splitlines()
    assert '"kind":"categorical","engines":"local,dask","gold":true,"saved_models":true,"requires":""}' in jsonl[3]
    full = runner.invoke(app, ["methods", "ds"]).stdout.splitlines()
    assert full[1:7] == ["", "Kind: categorical aggregator (answers -> one label per task)", "Engines: local, dask",
                         "Gold: --gold FILE, known labels that clamp those tasks",
                         "Saved worker models: --save-workers FILE, --init-workers FILE", ""]
    assert runner.invoke(app, ["methods", "wawa"]).stdout.splitlines()[4:6] == ["Gold: no", "Saved worker models: no"]
    assert rows["crowdlayer"].startswith("crowdlayer,CrowdLayer,") and rows["crowdlayer"].endswith(
        ",trainer,local,false,false,train")
    assert list(rows) == [*METHODS, *TRAINERS]


def test_methods_shows_a_trainer_with_its_flags_and_names_both_kinds_for_an_unknown_name():
    runner = CliRunner()
    full = runner.invoke(app, ["methods", "crowdlayer"])
    assert full.exit_code == 0, full.stderr
    lines = full.stdout.splitlines()
    assert lines[2] == "Kind: trainer (features + answers -> a model)"
    assert "  epochs (int, default 100, 1 .. 100000; --epochs)" in lines
    assert "  dropout (float, default 0.5, 0 .. 0.95; -p dropout=VALUE)" in lines
    unknown = runner.invoke(app, ["methods", "nope"])
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("Error: unknown method 'nope'; aggregation methods: mv, wmv,")
    assert "; trainers: crowdlayer" in unknown.stderr


def test_a_trainers_help_lists_its_module_groups_with_their_learning_rates():
    from crowdagg.cli.methods import method_text
    from crowdagg.methods.registry import get_trainer

    text = method_text(get_trainer("tracereg"))
    assert "Module groups (each its own Adam parameter group):" in text
    assert "  network (lr, weight decay --weight-decay): the classifier" in text
    assert "  confusion (lr × confusion_lr_scale, no weight decay): the annotators' confusion logits" in \
        " ".join(text.split("\n      "))
    assert method_text(get_trainer("raykar")).rstrip().endswith("the classifier")  # its confusions: a buffer
