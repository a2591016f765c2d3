"""The method registry: declared parameters, restarts, and a method added through the registry alone (wawa)."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg import load_annotations
from crowdagg.cli import app
from crowdagg.data.annotations import AnnotationSet
from crowdagg.data.numeric import NumericAnswers
from crowdagg.errors import UsageError
from crowdagg.methods.api import REGISTRY, aggregate, get_method
from crowdagg.methods.registry import KINDS, METHODS, SEED, Method, Param, get
from tests import reference

BLUEBIRD = "example:bluebird"


@pytest.fixture(scope="module")
def bluebird() -> AnnotationSet:
    return load_annotations(BLUEBIRD)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_declared_method_loads_and_its_defaults_are_valid(name, bluebird):
    spec = get(name)
    cls = spec.load()
    assert cls.name == name and cls.params() == spec.param_names
    defaults = cls().check_params()
    assert defaults == {p.name: p.default for p in spec.params}
    if spec.kind == "numeric":  # deterministic (no seed), and fitted on numbers: bluebird's labels read as values
        numbers = NumericAnswers.from_codes(bluebird.task, bluebird.worker, bluebird.label.astype(float))
        result = cls().fit(numbers)
        assert result.method == name and result.values.shape == (bluebird.n_tasks,)
        return
    assert "seed" in spec.param_names
    result = cls().fit(bluebird)
    assert result.method == name and result.posteriors.shape == (bluebird.n_tasks, bluebird.n_classes)


@pytest.mark.parametrize(("name", "p"), [(m.name, p) for m in METHODS.values() for p in m.params])
def test_out_of_range_values_are_refused_naming_the_parameter(name, p: Param):
    cls = get(name).load()
    bad = []
    if math.isfinite(p.low):
        bad.append(p.low - 1 if p.kind is int else p.low - 1e-3)
    if math.isfinite(p.high):
        bad.append(p.high + 1 if p.kind is int else p.high * 2 + 1)
    bad.append("x")
    for value in bad:
        with pytest.raises(UsageError, match=rf"^{p.name} must be"):
            cls(**{p.name: value}).check_params()
    with pytest.raises(UsageError, match=rf"^{p.name} must be"):
        p.parse("not-a-number")


def test_a_parameter_the_method_does_not_take_names_the_ones_it_does():
    with pytest.raises(UsageError, match=r"method 'mv' does not take smoothing; it takes: seed"):
        aggregate(load_annotations(BLUEBIRD), "mv", smoothing=1.0)
    with pytest.raises(UsageError, match="unknown method 'nope'; valid methods: mv, wmv, wawa, ds, onecoin"):
        get_method("nope")


def test_restarts_are_never_worse_than_one_start(bluebird):
    one = aggregate(bluebird, "ds", tol=1e-8)
    many = aggregate(bluebird, "ds", tol=1e-8, n_init=4, seed=3)
    assert many.log_likelihood[-1] >= one.log_likelihood[-1] - 1e-9
    again = aggregate(bluebird, "ds", tol=1e-8, n_init=4, seed=3)
    np.testing.assert_array_equal(many.posteriors, again.posteriors)  # seeded
    first = aggregate(bluebird, "ds", tol=1e-8, n_init=1, seed=3)
    np.testing.assert_array_equal(first.posteriors, one.posteriors)  # start 0 is soft MV, whatever the seed


def test_later_starts_are_seeded_draws_around_majority_vote(bluebird):
    from crowdagg.methods.blocks import soft_majority_vote
    from crowdagg.methods.em.ds import starting_posteriors

    mv = soft_majority_vote(bluebird)
    np.testing.assert_array_equal(starting_posteriors(bluebird, 0, np.random.default_rng(1)), mv)
    a = starting_posteriors(bluebird, 1, np.random.default_rng([7, 1]))
    b = starting_posteriors(bluebird, 1, np.random.default_rng([7, 1]))
    c = starting_posteriors(bluebird, 1, np.random.default_rng([8, 1]))
    np.testing.assert_array_equal(a, b)  # seeded
    assert not np.array_equal(a, c) and not np.array_equal(a, mv)
    np.testing.assert_allclose(a.sum(axis=1), 1.0)
    assert (np.abs(a - mv) <= 0.5 + 1e-12).all()  # half majority vote, half a Dirichlet draw


def test_wawa_matches_its_definition(rng):
    # K = 2 and 9 answers a task: the majority vote has no ties, so the reference's argmax agrees with ours.
    n_tasks, n_workers, k = 400, 25, 2
    acc = rng.uniform(0.4, 0.95, n_workers)
    truth = rng.integers(0, k, n_tasks)
    task, worker, label = [], [], []
    for t in range(n_tasks):
        for w in rng.choice(n_workers, 9, replace=False):
            task.append(t), worker.append(w), label.append(truth[t] if rng.random() < acc[w] else 1 - truth[t])
    data = AnnotationSet.from_codes(task, worker, label, n_workers=n_workers, n_classes=k)
    ref_labels, ref_post, ref_skills = reference.wawa(data.task, data.worker, data.label, n_tasks, n_workers, k)
    result = aggregate(data, "wawa")
    np.testing.assert_allclose(result.worker_params["accuracy"], ref_skills, rtol=0, atol=1e-15)
    np.testing.assert_allclose(result.posteriors, ref_post, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.labels, ref_labels)
    # the skills order the workers as their accuracies do (agreement with a noisy vote is biased towards it)
    assert np.corrcoef(result.worker_params["accuracy"], acc)[0, 1] > 0.8


def test_wawa_was_added_without_touching_the_cli():
    out = subprocess.run(["git", "log", "--format=%H", "-1", "--", "crowdagg/aggregators/wawa.py"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        pytest.skip("not a git checkout, or wawa not committed yet")
    changed = subprocess.run(["git", "show", "--name-only", "--format=", out.stdout.strip()],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "crowdagg/cli.py" not in changed


# --------------------------------------------------------------------------- CLI
def test_cli_param_option_and_methods_name():
    runner = CliRunner()
    a = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "--smoothing", "2"])
    b = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "-p", "smoothing=2"])
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout  # --smoothing is an alias
    c = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "onecoin", "-p", "smoothing=2", "--smoothing", "2"])
    assert c.exit_code == 2 and "given twice" in c.stderr
    d = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", "n_init=0"])
    assert d.exit_code == 2 and "Error: -p n_init must be an integer in [1, 1000], got 0" in d.stderr
    e = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "mv", "-p", "n_init=2"])
    assert e.exit_code == 2 and "method 'mv' does not take -p n_init; it takes: --seed" in e.stderr
    f = runner.invoke(app, ["methods", "ds"])
    assert f.exit_code == 0 and "doi:10.2307/2346806" in f.stdout and "n_init (int, default 1" in f.stdout
    g = runner.invoke(app, ["methods", "ds", "--format", "csv"])
    assert g.exit_code == 0 and g.stdout.splitlines()[0] == "parameter,type,default,range,paper,help"
    h = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "wawa"])
    assert h.exit_code == 0 and h.stdout.startswith("task,label,confidence\n")


def test_listing_methods_imports_no_method_code():
    code = ("import sys; from crowdagg._entry import main; main(['methods']); "
            "print(sorted(m for m in sys.modules if m.startswith(('numpy', 'numba', 'crowdagg.methods.api'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_parameter_given_twice_is_refused():
    runner = CliRunner()
    a = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "--seed", "3", "-p", "seed=5"])
    assert a.exit_code == 2 and "seed is given twice" in a.stderr
    b = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", "n_init=2", "-p", "n_init=3"])
    assert b.exit_code == 2 and "n_init is given twice (-p n_init= twice)" in b.stderr
    for bad in ("n_init=1_0", "n_init=\u0663"):
        c = runner.invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", bad])
        assert c.exit_code == 2 and "must be an integer" in c.stderr


def test_none_stands_for_the_default(bluebird):
    assert get_method("onecoin")(smoothing=None).check_params()["smoothing"] == 1.0
    with pytest.raises(UsageError, match="it takes: seed, max_iter, tol, smoothing, n_init, init, gold, init_workers"):
        aggregate(bluebird, "ds", bogus=1)


# --------------------------------------------------------------------------- kinds, engines, listing order
EXPECTED = {  # name: (gold, saved worker models)
    "mv": (False, False), "wmv": (False, False), "wawa": (False, False), "ds": (True, True), "onecoin": (True, True),
}
#: Where each runs: on this machine, and on a Dask cluster (tests/engine/test_dask.py).
ENGINES = {name: ("local", "dask") for name in ("mv", "wmv", "wawa", "ds", "onecoin")}


def test_every_declaration_states_its_kind_engines_gold_and_saved_models():
    assert [n for n in METHODS if n in EXPECTED] == list(EXPECTED)  # the declared ranks keep this order
    assert list(REGISTRY) == list(METHODS) == sorted(METHODS, key=lambda n: (METHODS[n].rank, n))
    for name, (gold, saved) in EXPECTED.items():
        m = METHODS[name]
        assert (m.kind, m.engines, m.requires, m.gold, m.init_workers) == ("categorical", ENGINES[name], "", gold,
                                                                            saved)
        assert m.missing() == ()
    assert [METHODS[n].rank for n in EXPECTED] == [10, 20, 30, 40, 50]
    assert set(KINDS) == {"categorical", "numeric", "trainer"}


def test_every_family_declares_its_methods_without_failure():
    from crowdagg.methods.registry import failures

    assert failures() == {}  # a family that failed to import, or a name declared twice, is caught here


def test_each_family_declares_its_own_methods():
    import crowdagg.methods.em as em
    import crowdagg.methods.votes as votes

    assert [m.name for m in votes.DECLARATIONS] == ["mv", "wmv", "iwmv", "wawa", "bwa"]
    assert [m.name for m in em.DECLARATIONS] == ["ds", "onecoin", "ds-clust"]
    for m in (*votes.DECLARATIONS, *em.DECLARATIONS):
        family = "votes" if m in votes.DECLARATIONS else "em"
        assert m.target.startswith(f"crowdagg.methods.{family}.")  # its class lives in its family


@pytest.mark.parametrize(("bad", "words"), [
    ({"kind": "ordinal"}, "kind must be one of categorical, numeric, trainer, got 'ordinal'"),
    ({"engines": ("spark",)}, "engines must be among local, dask, got ('spark',)"),
    ({"engines": ()}, "engines must be among local"),
    ({"requires": "gpu"}, "requires an unknown extra 'gpu'; extras: train"),
    ({"target": "crowdagg.methods.votes.mv"}, "target must be 'module:Class'"),
    ({"params": (SEED, SEED)}, "a parameter is declared twice"),
])
def test_a_wrong_declaration_is_refused_where_it_is_written(bad, words):
    fields = {"name": "x", "target": "m:C", "summary": "", "model": "", "reference": "", **bad}
    with pytest.raises(TypeError, match=re.escape(words)):
        Method(**fields)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"kind": "list"}, "unknown kind 'list'"),
    ({"kind": str}, "unknown kind <class 'str'>"),
    ({"kind": "choice"}, "a choice needs its choices"),
    ({"kind": "choice", "choices": ["a", "b"]}, "choices must be a tuple of strings"),
])
def test_a_wrong_parameter_declaration_is_refused(kwargs, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        Param("p", default=None, help="", **kwargs)


# --------------------------------------------------------------------------- parameter kinds
INIT = Param("init", "method", "soft-vote", "how EM starts", choices=("soft-vote", "hard-vote"))
MODE = Param("mode", "choice", "fast", "how", choices=("fast", "exact"))
PRIOR = Param("prior", "numbers", None, "class prior", 0.0, 1.0)
SIZES = Param("sizes", "numbers", (64.0, 32.0), "hidden layers", 1, 4096)
BASES = Param("bases", "methods", ("mv", "ds"), "methods to combine")
NOTE = Param("note", "text", "", "a note")
MODEL = Param("model", "path", None, "where the model goes")
DEVICE = Param("device", "device", "auto", "where to train")
NEW_KINDS = (INIT, MODE, PRIOR, SIZES, BASES, NOTE, MODEL, DEVICE)
VALID_METHODS = ", ".join(n for n, m in METHODS.items() if m.kind == "categorical")  # mv, wmv, ... (any added since)

# param, CLI text -> value
PARSED = [
    (INIT, "ds", "ds"), (INIT, " hard-vote ", "hard-vote"), (INIT, "soft-vote", "soft-vote"),
    (MODE, "exact", "exact"),
    (PRIOR, "0.9,0.1", (0.9, 0.1)), (PRIOR, " 0.5 , 0.25,0.25 ", (0.5, 0.25, 0.25)), (PRIOR, "1", (1.0,)),
    (SIZES, "128,64,1", (128.0, 64.0, 1.0)),
    (BASES, "mv,ds,onecoin", ("mv", "ds", "onecoin")), (BASES, "wawa", ("wawa",)), (BASES, " mv , ds", ("mv", "ds")),
    (NOTE, " as typed, commas too ", " as typed, commas too "), (NOTE, "", ""),
    (MODEL, "out/model.pt", "out/model.pt"), (MODEL, "my model.pt", "my model.pt"),
    (DEVICE, "cpu", "cpu"), (DEVICE, "cuda", "cuda"), (DEVICE, "cuda:0", "cuda:0"), (DEVICE, "cuda:12", "cuda:12"),
    (DEVICE, "auto", "auto"),
]
# param, CLI text -> the whole message in library terms (the CLI shows -p NAME for NAME)
REFUSED = [
    (INIT, "nope", f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got 'nope'"),
    (INIT, "DS", f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got 'DS'"),
    (INIT, "", f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got ''"),
    (MODE, "slow", "mode must be one of fast, exact, got 'slow'"),
    (PRIOR, "0.9;0.1", "prior must be comma-separated numbers, each 0 .. 1, got '0.9;0.1'"),
    (PRIOR, "0.9,", "prior must be comma-separated numbers, each 0 .. 1, got '0.9,'"),
    (PRIOR, "1.5,0", "prior must be comma-separated numbers, each 0 .. 1, got '1.5,0'"),
    (PRIOR, "nan,0", "prior must be comma-separated numbers, each 0 .. 1, got 'nan,0'"),
    (PRIOR, "0.5,1_0", "prior must be comma-separated numbers, each 0 .. 1, got '0.5,1_0'"),
    (PRIOR, "", "prior must be comma-separated numbers, each 0 .. 1, got ''"),
    (SIZES, "64,0", "sizes must be comma-separated numbers, each 1 .. 4096, got '64,0'"),
    (BASES, "mv,nope", f"bases must be comma-separated methods ({VALID_METHODS}), each once, got 'mv,nope'"),
    (BASES, "mv,,ds", f"bases must be comma-separated methods ({VALID_METHODS}), each once, got 'mv,,ds'"),
    (BASES, "mv,ds,mv", "bases lists 'mv' twice"),
    (MODEL, "", "model must be a file path, got ''"),
    (MODEL, "  ", "model must be a file path, got '  '"),
    (DEVICE, "gpu", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'gpu'"),
    (DEVICE, "cuda:", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'cuda:'"),
    (DEVICE, "cuda:-1", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'cuda:-1'"),
    (DEVICE, "cuda:\u0663", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'cuda:\u0663'"),
    (DEVICE, "CPU", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'CPU'"),
]
# param, Python value -> checked value
CHECKED = [
    (INIT, "onecoin", "onecoin"), (MODE, "fast", "fast"),
    (PRIOR, [0.5, 0.5], (0.5, 0.5)), (PRIOR, (1, 0), (1.0, 0.0)), (PRIOR, np.array([0.2, 0.8]), (0.2, 0.8)),
    (PRIOR, None, None),
    (BASES, ["mv", "ds"], ("mv", "ds")), (BASES, "mv,ds", ("mv", "ds")), (BASES, ("wawa",), ("wawa",)),
    (NOTE, "x", "x"), (MODEL, "m.pt", "m.pt"), (MODEL, None, None), (DEVICE, "cuda:3", "cuda:3"),
]
# param, Python value -> the message
WRONG = [
    (INIT, 3, f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got 3"),
    (INIT, None, f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got None"),
    (MODE, "Fast", "mode must be one of fast, exact, got 'Fast'"),
    (PRIOR, "0.5,0.5", "prior must be a sequence of numbers, each 0 .. 1, got '0.5,0.5'"),
    (PRIOR, [0.5, 2], "prior must be a sequence of numbers, each 0 .. 1, got [0.5, 2]"),
    (PRIOR, [True, False], "prior must be a sequence of numbers, each 0 .. 1, got [True, False]"),
    (PRIOR, [], "prior must be a sequence of numbers, each 0 .. 1, got []"),
    (PRIOR, 0.5, "prior must be a sequence of numbers, each 0 .. 1, got 0.5"),
    (PRIOR, [0.5, None], "prior must be a sequence of numbers, each 0 .. 1, got [0.5, None]"),
    (SIZES, None, "sizes must be a sequence of numbers, each 1 .. 4096, got None"),
    (BASES, ["mv", "x"], f"bases must be a list of methods ({VALID_METHODS}), each once, got ['mv', 'x']"),
    (BASES, [], f"bases must be a list of methods ({VALID_METHODS}), each once, got []"),
    (BASES, ["mv", "mv"], "bases lists 'mv' twice"),
    (PRIOR, {0.5: 1}, "prior must be a sequence of numbers, each 0 .. 1, got {0.5: 1}"),
    (PRIOR, np.array([[0.5, 0.5]]), "prior must be a sequence of numbers, each 0 .. 1, got array([[0.5, 0.5]])"),
    (BASES, {"mv"}, f"bases must be a list of methods ({VALID_METHODS}), each once, got {{'mv'}}"),
    (NOTE, 5, "note must be a string, got 5"),
    (MODEL, "", "model must be a file path, got ''"),
    (MODEL, 5, "model must be a file path, got 5"),
    (MODEL, " ", "model must be a file path, got ' '"),
    (MODEL, b"m.pt", "model must be a file path, got b'm.pt'"),
    (BASES, "mv,x", f"bases must be a list of methods ({VALID_METHODS}), each once, got 'mv,x'"),
    (DEVICE, "cuda:x", "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 'cuda:x'"),
    (DEVICE, 0, "device must be cpu, cuda, cuda:N (N = 0, 1, ...) or auto, got 0"),
]


@pytest.mark.parametrize(("p", "text", "value"), PARSED, ids=[f"{p.name}={t!r}" for p, t, _ in PARSED])
def test_each_parameter_kind_parses_command_line_text(p, text, value):
    got = p.parse(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("p", "text", "words"), REFUSED, ids=[f"{p.name}={t!r}" for p, t, _ in REFUSED])
def test_each_parameter_kind_refuses_bad_text_naming_the_parameter(p, text, words):
    with pytest.raises(UsageError) as info:
        p.parse(text)
    assert str(info.value) == words  # library terms
    flag = f"-p {p.name}"
    assert info.value.render({p.name: flag}) == flag + words[len(p.name):]  # CLI terms


@pytest.mark.parametrize(("p", "value", "checked"), CHECKED, ids=[f"{p.name}={v!r}" for p, v, _ in CHECKED])
def test_each_parameter_kind_checks_python_values(p, value, checked):
    assert p.check(value) == checked


@pytest.mark.parametrize(("p", "value", "words"), WRONG, ids=[f"{p.name}={v!r}" for p, v, _ in WRONG])
def test_each_parameter_kind_refuses_wrong_python_values_naming_the_parameter(p, value, words):
    with pytest.raises(UsageError) as info:
        p.check(value)
    assert str(info.value) == words


def test_a_path_like_is_a_path_and_a_method_start_may_be_a_posterior(tmp_path):
    from pathlib import Path

    assert MODEL.check(tmp_path / "m.pt") == str(tmp_path / "m.pt")  # existence is checked where it is read
    assert MODEL.check(Path("no/such/dir/m.pt")) == "no/such/dir/m.pt"
    posterior = np.full((3, 2), 0.5)
    assert INIT.check(posterior) is posterior  # a given posterior: the method checks it against the data


def test_each_kind_is_described_from_its_declaration():
    rows = [(p.kind_name, p.describe_type(), p.describe_type(cli=True), p.describe_range(), p.describe_default())
            for p in NEW_KINDS]
    assert rows == [
        ("method", f"soft-vote, hard-vote or a method ({VALID_METHODS})",
         f"soft-vote, hard-vote or a method ({VALID_METHODS})", "soft-vote, hard-vote or a method", "'soft-vote'"),
        ("choice", "one of fast, exact", "one of fast, exact", "one of fast, exact", "'fast'"),
        ("numbers", "a sequence of numbers, each 0 .. 1", "comma-separated numbers, each 0 .. 1", "each 0 .. 1", "none"),
        ("numbers", "a sequence of numbers, each 1 .. 4096", "comma-separated numbers, each 1 .. 4096",
         "each 1 .. 4096", "64,32"),
        ("methods", f"a list of methods ({VALID_METHODS}), each once",
         f"comma-separated methods ({VALID_METHODS}), each once", "registered methods", "mv,ds"),
        ("text", "a string", "text", "", "''"),
        ("path", "a file path", "a file path", "", "none"),
        ("device", "cpu, cuda, cuda:N (N = 0, 1, ...) or auto", "cpu, cuda, cuda:N (N = 0, 1, ...) or auto",
         "cpu, cuda, cuda:N or auto", "'auto'"),
    ]
    # the original kinds are described as before
    n_init, smoothing, tol_ = (METHODS["ds"].param(n) for n in ("n_init", "smoothing", "tol"))
    assert [(p.kind_name, p.describe_type(), p.describe_range(), p.describe_default())
            for p in (n_init, smoothing, tol_)] == [
        ("int", "an integer", "1 .. 1000", "1"), ("float", "a number", "0 .. 1e+09", "0.0"),
        ("float", "a number", "0 .. 0.5", "1e-06")]
    assert Param("b", bool, True, "").describe_range() == "" and Param("b", bool, True, "").parse(" Yes ") is True


def test_a_methods_parameter_may_also_take_its_choices():
    p = Param("start", "methods", ("soft-vote",), "", choices=("soft-vote", "hard-vote"))
    assert p.parse("hard-vote,ds") == ("hard-vote", "ds")
    assert p.describe_type(cli=True) == f"comma-separated methods or soft-vote, hard-vote ({VALID_METHODS}), each once"
    with pytest.raises(UsageError, match="start must be comma-separated methods or soft-vote"):
        p.parse("medium-vote")


# --------------------------------------------------------------------------- the kinds through the library and the CLI
@pytest.fixture
def ds_with_new_kinds(monkeypatch):
    """ds declared with one parameter of each new kind (as a coming method would declare them)."""
    import dataclasses

    from crowdagg.methods import registry

    ds = registry.METHODS["ds"]
    declared = tuple(p for p in ds.params if p.name not in {q.name for q in NEW_KINDS}) + NEW_KINDS
    monkeypatch.setitem(registry.METHODS, "ds", dataclasses.replace(ds, params=declared))
    return registry.METHODS["ds"]


@pytest.mark.parametrize(("p", "text", "words"), REFUSED, ids=[f"{p.name}={t!r}" for p, t, _ in REFUSED])
def test_the_cli_words_a_bad_value_of_each_kind_as_its_flag(ds_with_new_kinds, p, text, words):
    result = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", f"{p.name}={text}"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"Error: -p {p.name}{words[len(p.name):]}\n"


WRONG_GIVEN = [(p, v, w) for p, v, w in WRONG if v is not None]  # to a method, None stands for the default


@pytest.mark.parametrize(("p", "value", "words"), WRONG_GIVEN, ids=[f"{p.name}={v!r}" for p, v, _ in WRONG_GIVEN])
def test_the_library_words_a_wrong_value_of_each_kind_as_its_keyword(ds_with_new_kinds, bluebird, p, value, words):
    with pytest.raises(UsageError) as info:
        aggregate(bluebird, "ds", **{p.name: value})
    assert str(info.value) == words


def test_the_cli_takes_a_good_value_of_each_kind(ds_with_new_kinds):
    from crowdagg.cli.options import method_params

    pairs = ["init=hard-vote", "mode=exact", "prior=0.3,0.7", "sizes=8", "bases=wawa,onecoin", "note= hi ",
             "model=m.pt", "device=cuda:1"]
    assert method_params(ds_with_new_kinds, {"seed": None}, pairs) == {
        "init": "hard-vote", "mode": "exact", "prior": (0.3, 0.7), "sizes": (8.0,), "bases": ("wawa", "onecoin"),
        "note": " hi ", "model": "m.pt", "device": "cuda:1"}


def test_methods_name_shows_each_kind_from_its_declaration(ds_with_new_kinds):
    result = CliRunner().invoke(app, ["methods", "ds"])
    assert result.exit_code == 0 and result.stderr == ""
    heads = [ln for ln in result.stdout.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]
    assert heads[-8:] == [
        "  init (method, default 'soft-vote', soft-vote, hard-vote or a method; -p init=VALUE)",
        "  mode (choice, default 'fast', one of fast, exact; -p mode=VALUE)",
        "  prior (numbers, default none, each 0 .. 1; -p prior=VALUE)",
        "  sizes (numbers, default 64,32, each 1 .. 4096; -p sizes=VALUE)",
        "  bases (methods, default mv,ds, registered methods; -p bases=VALUE)",
        "  note (text, default ''; -p note=VALUE)",
        "  model (path, default none; -p model=VALUE)",
        "  device (device, default 'auto', cpu, cuda, cuda:N or auto; -p device=VALUE)",
    ]
    table = CliRunner().invoke(app, ["methods", "ds", "--format", "csv"])
    rows = table.stdout.splitlines()
    assert rows[0] == "parameter,type,default,range,paper,help"
    assert rows[-8:] == [
        "init,method,'soft-vote',\"soft-vote, hard-vote or a method\",,how EM starts",
        "mode,choice,'fast',\"one of fast, exact\",,how",
        "prior,numbers,none,each 0 .. 1,,class prior",
        "sizes,numbers,\"64,32\",each 1 .. 4096,,hidden layers",
        "bases,methods,\"mv,ds\",registered methods,,methods to combine",
        "note,text,'',,,a note",
        "model,path,none,,,where the model goes",
        "device,device,'auto',\"cpu, cuda, cuda:N or auto\",,where to train",
    ]


def test_init_of_ds_is_a_method_parameter_in_both_terms(bluebird):
    words = f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got 'nope'"
    result = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "ds", "-p", "init=nope"])
    assert result.exit_code == 2 and result.stdout == "" and result.stderr == f"Error: -p {words}\n"
    with pytest.raises(UsageError) as info:
        aggregate(bluebird, "ds", init="nope")
    assert str(info.value) == words


# --------------------------------------------------------------------------- laziness
# Every module under crowdagg.methods that is not the registry, the parameter kinds or a family's declarations.
_LAZY_CHECK = """
import sys, json
from crowdagg.methods import registry
names = list(registry.METHODS)
{body}
families = [m for m in sys.modules if m.count(".") == 2 and m.startswith("crowdagg.methods.")
            and hasattr(sys.modules[m], "DECLARATIONS")]
light = {{"crowdagg.methods", "crowdagg.methods.registry", *families}}
print(json.dumps({{
    "names": names,
    "families": sorted(families),
    "method_code": sorted(m for m in sys.modules if m.startswith("crowdagg.methods") and m not in light),
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "torch", "pandas", "scipy")
                    or m.startswith("crowdagg.kernels")),
}}))
"""


def _imports_after(body: str) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", _LAZY_CHECK.format(body=body)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_listing_and_validating_import_no_method_module():
    seen = _imports_after(
        "spec = registry.get('ds'); spec.param('n_init').parse('3'); spec.param('tol').check(1e-3)\n"
        "list(registry.REGISTRY); len(registry.REGISTRY); 'ds' in registry.REGISTRY; registry.failures()\n"
        "[m.missing() for m in registry.METHODS.values()]\n"
        "registry.Method('t', 'm:C', '', '', '', requires='train').missing()  # torch found, not imported\n"
        "try:\n    registry.get('nope')\nexcept KeyError:\n    pass\n"
    )
    assert seen["names"] == list(METHODS)
    assert {"crowdagg.methods.em", "crowdagg.methods.votes"} <= set(seen["families"])
    assert seen["method_code"] == [] and seen["heavy"] == []


def test_the_registry_imports_a_class_when_it_is_asked_for_and_that_one_only():
    seen = _imports_after("cls = registry.REGISTRY['mv']; assert cls.__name__ == 'MajorityVote'")
    assert "crowdagg.methods.votes.mv" in seen["method_code"]
    assert not any(m.startswith(("crowdagg.methods.em.", "crowdagg.methods.votes.w")) for m in seen["method_code"])


def test_the_command_line_lists_and_explains_methods_without_method_code():
    code = ("import sys; from crowdagg._entry import main; main(['methods']); main(['methods', 'ds']); "
            "main(['aggregate', '--help']); "
            "print([m for m in sys.modules if m.startswith(('numba', 'crowdagg.methods.api', 'crowdagg.methods.base', "
            "'crowdagg.methods.em.', 'crowdagg.methods.votes.', 'crowdagg.kernels'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_lazy_registry_is_a_mapping_of_classes():
    from crowdagg import REGISTRY as public
    from crowdagg.methods.em.ds import DawidSkene

    assert public is REGISTRY and public["ds"] is DawidSkene is get_method("ds")
    assert "ds" in REGISTRY and "nope" not in REGISTRY and ["ds"] not in REGISTRY and len(REGISTRY) == len(METHODS)
    assert REGISTRY.get("nope") is None and dict(REGISTRY.items())["mv"].__name__ == "MajorityVote"
    with pytest.raises(KeyError):
        REGISTRY["nope"]
    with pytest.raises(UsageError, match=f"unknown method 'nope'; valid methods: {', '.join(METHODS)}$"):
        REGISTRY["nope"]


# --------------------------------------------------------------------------- a family added alone; failing alone
_OKAY_FAMILY = '''
from ..registry import SEED, Method

DECLARATIONS = (
    Method("okay", "crowdagg.methods.zz_extra.okay:Okay", "a vote declared by a family of its own", "m", "r",
           (SEED,), rank=25),
    Method("needs_x", "crowdagg.methods.zz_extra.okay:Okay", "needs an extra that is not installed", "m", "r",
           (SEED,), requires="nosuchextra", rank=900),
    Method("bad_module", "crowdagg.methods.zz_extra.bad:Bad", "its module fails to import", "m", "r", (SEED,),
           rank=901),
)
'''
_OKAY_MODULE = '''
from ..votes.mv import MajorityVote


class Okay(MajorityVote):
    name = "okay"
'''


@pytest.fixture
def extra_families(tmp_path, monkeypatch):
    """Three families beside the real ones (a package directory added to crowdagg.methods' path):
    ``zz_extra`` (a working method, one needing a missing extra, one whose module fails to import),
    ``zz_broken`` (its declarations fail to import) and ``zz_twice`` (declares a name ds already has)."""
    import crowdagg.methods
    from crowdagg.methods import registry

    root = tmp_path / "families"
    (root / "zz_extra").mkdir(parents=True)
    (root / "zz_extra" / "__init__.py").write_text(_OKAY_FAMILY)
    (root / "zz_extra" / "okay.py").write_text(_OKAY_MODULE)
    (root / "zz_extra" / "bad.py").write_text("import crowdagg_no_such_module_either\n")
    (root / "zz_broken").mkdir()
    (root / "zz_broken" / "__init__.py").write_text("raise ImportError('the declarations are broken')\n")
    (root / "zz_twice").mkdir()
    (root / "zz_twice" / "__init__.py").write_text(
        "from ..registry import Method\nDECLARATIONS = (Method('ds', 'x:Y', 's', 'm', 'r'),)\n")
    (root / "zz_shared").mkdir()
    (root / "zz_shared" / "__init__.py").write_text('"""Shared pieces: no DECLARATIONS, not a family."""\n')
    monkeypatch.setattr(crowdagg.methods, "__path__", [*crowdagg.methods.__path__, str(root)])
    monkeypatch.setitem(registry.EXTRAS, "nosuchextra", ("crowdagg_no_such_module",))
    monkeypatch.setattr(registry, "METHODS", registry._Declarations())
    yield registry
    for name in [m for m in sys.modules if m.startswith("crowdagg.methods.zz_")]:
        del sys.modules[name]


def test_a_family_in_its_own_package_is_found_listed_by_rank_and_runs(extra_families, bluebird):
    registry = extra_families
    listed = list(registry.METHODS)
    assert listed == sorted(listed, key=lambda n: (registry.METHODS[n].rank, n))
    assert listed[listed.index("wmv"):listed.index("wawa") + 1] == ["wmv", "okay", "wawa"]  # rank 25
    assert set(listed) == {*METHODS, "okay", "needs_x", "bad_module"}
    result = aggregate(bluebird, "okay", seed=1)
    np.testing.assert_array_equal(result.posteriors, aggregate(bluebird, "mv", seed=1).posteriors)
    assert result.method == "okay"
    ok = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "okay"])
    assert ok.exit_code == 0 and ok.stdout == CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "mv"]).stdout


def test_a_family_that_fails_to_import_fails_alone(extra_families, bluebird):
    registry = extra_families
    failed = registry.failures()
    assert failed == {
        "crowdagg.methods.zz_broken": "ImportError: the declarations are broken",
        "crowdagg.methods.zz_twice": "TypeError: it declares a method name already taken: 'ds' (declared by "
                                     "crowdagg.methods.em)",
    }
    assert registry.METHODS["ds"].target == "crowdagg.methods.em.ds:DawidSkene"  # the first declaration stands
    with pytest.raises(UsageError) as info:
        registry.get("nope")
    assert str(info.value) == (
        f"unknown method 'nope'; valid methods: {', '.join(registry.METHODS)}; "
        "crowdagg.methods.zz_broken failed to declare its methods (ImportError: the declarations are broken); "
        "crowdagg.methods.zz_twice failed to declare its methods (TypeError: it declares a method name already "
        "taken: 'ds' (declared by crowdagg.methods.em))")
    assert aggregate(bluebird, "ds").method == "ds"
    assert repr(registry.METHODS).endswith(
        "bad_module; crowdagg.methods.zz_broken failed (ImportError: the declarations are broken); "
        "crowdagg.methods.zz_twice failed (TypeError: it declares a method name already taken: 'ds' (declared by "
        "crowdagg.methods.em))>")


def test_a_method_whose_extra_is_missing_fails_alone_naming_the_extra(extra_families, bluebird):
    registry = extra_families
    spec = registry.get("needs_x")
    assert spec.missing() == ("crowdagg_no_such_module",)
    words = ("method 'needs_x' needs the optional extra 'nosuchextra' (crowdagg_no_such_module not installed): "
             "pip install 'crowdagg[nosuchextra]'")
    for ask in (lambda: registry.REGISTRY["needs_x"], lambda: get_method("needs_x"),
                lambda: aggregate(bluebird, "needs_x")):
        with pytest.raises(UsageError) as info:
            ask()
        assert str(info.value) == words
    result = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "needs_x"])
    assert result.exit_code == 2 and result.stdout == "" and result.stderr == f"Error: {words}\n"
    assert "crowdagg.methods.zz_extra.okay" not in sys.modules  # refused before its module was imported
    assert registry.REGISTRY["okay"].__name__ == "Okay"  # the others still work


def test_methods_lists_the_others_and_says_what_failed(extra_families):
    registry = extra_families
    runner = CliRunner()
    listed = runner.invoke(app, ["methods"])
    assert listed.exit_code == 0
    lines = dict(ln.split(None, 1) for ln in listed.stdout.splitlines())
    assert list(lines) == [*registry.METHODS, *registry.TRAINERS]  # the trainers after the aggregators
    assert lines["needs_x"] == "needs an extra that is not installed [needs: pip install 'crowdagg[nosuchextra]']"
    assert lines["okay"] == "a vote declared by a family of its own"
    assert listed.stderr == (
        "Warning: crowdagg.methods.zz_broken failed to declare its methods, which are not listed: ImportError: "
        "the declarations are broken\n"
        "Warning: crowdagg.methods.zz_twice failed to declare its methods, which are not listed: TypeError: it "
        "declares a method name already taken: 'ds' (declared by crowdagg.methods.em)\n")
    shown = runner.invoke(app, ["methods", "needs_x"])
    assert shown.exit_code == 0 and shown.stdout.splitlines()[2:7] == [
        "Kind: categorical aggregator (answers -> one label per task)", "Engines: local", "Gold: no", "Saved worker models: no",
        "Requires: the optional extra 'nosuchextra' (pip install 'crowdagg[nosuchextra]'; crowdagg_no_such_module "
        "not installed)"]
    csv = runner.invoke(app, ["methods", "-f", "csv"]).stdout.splitlines()
    assert csv[-2 - len(registry.TRAINERS)] == "needs_x,Okay,needs an extra that is not installed,categorical,local,false,false,nosuchextra"
    unknown = runner.invoke(app, ["methods", "nope"])
    assert unknown.exit_code == 2 and "zz_broken failed to declare its methods" in unknown.stderr


def test_a_method_whose_module_fails_to_import_fails_alone_naming_the_error(extra_families, bluebird):
    registry = extra_families
    words = ("method 'bad_module' is unavailable: importing crowdagg.methods.zz_extra.bad:Bad failed "
             "(ModuleNotFoundError: No module named 'crowdagg_no_such_module_either')")
    with pytest.raises(UsageError) as info:
        aggregate(bluebird, "bad_module")
    assert str(info.value) == words and isinstance(info.value.__cause__, ModuleNotFoundError)
    result = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "bad_module"])
    assert result.exit_code == 2 and result.stderr == f"Error: {words}\n"
    assert aggregate(bluebird, "okay").method == "okay" and list(registry.REGISTRY)[-1] == "bad_module"


def test_a_new_family_package_ships_without_editing_the_packaging():
    from pathlib import Path

    import tomllib
    from setuptools import find_packages

    root = Path(__file__).resolve().parents[2]
    found = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = set(find_packages(str(root), include=found["include"]))
    on_disk = {".".join(p.parent.relative_to(root).parts) for p in (root / "crowdagg").rglob("__init__.py")}
    assert shipped == on_disk and {"crowdagg.methods.em", "crowdagg.methods.votes"} <= shipped


def test_a_declaration_set_at_run_time_is_listed_by_rank_and_can_be_taken_back(monkeypatch):
    from crowdagg.methods import registry

    spec = Method("between", "crowdagg.methods.votes.mv:MajorityVote", "s", "m", "r", (SEED,), rank=15)
    monkeypatch.setitem(registry.METHODS, "between", spec)
    listed = list(registry.METHODS)
    assert listed[listed.index("mv") + 1] == "between" and registry.REGISTRY["between"].__name__ == "MajorityVote"
    with pytest.raises(TypeError, match="takes a Method named 'other'"):
        registry.METHODS["other"] = spec
    monkeypatch.undo()
    assert "between" not in registry.METHODS and "between" not in registry.REGISTRY


# --------------------------------------------------------------------------- hostile: odd values and odd families
UNBOUNDED_INT = Param("count", int, 0, "an int declared without bounds")
CAPPED_INT = Param("count", int, 0, "an int declared with an upper bound only", high=5)
UNBOUNDED_FLOAT = Param("shift", float, 0.0, "a float declared without bounds")
HALF_INT = Param("count", int, 1, "an int whose declared bounds are not integers", 0.5, 9.5)


@pytest.mark.parametrize(("p", "value", "checked"), [
    (UNBOUNDED_INT, -7, -7), (UNBOUNDED_INT, 10**30, 10**30), (CAPPED_INT, -3, -3), (CAPPED_INT, 5, 5),
    (HALF_INT, 1, 1), (HALF_INT, 9, 9), (UNBOUNDED_FLOAT, -1e300, -1e300),
])
def test_numbers_declared_with_infinite_or_fractional_bounds_are_checked(p, value, checked):
    """The declared default bounds are -inf/inf: an int declared without them must check, not crash."""
    got = p.check(value)
    assert got == checked and type(got) is type(checked)
    assert p.parse(str(value)) == checked
    assert HALF_INT.describe_range() == "1 .. 9" and CAPPED_INT.describe_range() == "<= 5"


@pytest.mark.parametrize(("p", "value", "words"), [
    (UNBOUNDED_INT, 1.5, "count must be an integer, got 1.5"),
    (CAPPED_INT, 6, "count must be an integer <= 5, got 6"),
    (HALF_INT, 0, "count must be an integer in [1, 9], got 0"),
    (HALF_INT, 10, "count must be an integer in [1, 9], got 10"),
    (UNBOUNDED_FLOAT, float("nan"), "shift must be a finite number, got nan"),
    (UNBOUNDED_FLOAT, 10**400, "shift must be a finite number, got an int"),  # 401 digits: named by its type
    (Param("f", float, 0.5, "h", high=1.0), 2.0, "f must be a finite number <= 1, got 2.0"),
    (PRIOR, (10**400,), "prior must be a sequence of numbers, each 0 .. 1, got a tuple"),
])
def test_numbers_out_of_range_or_too_large_are_refused_not_crashing(p, value, words):
    with pytest.raises(UsageError) as info:
        p.check(value)
    assert str(info.value) == words


def test_a_device_index_is_read_as_a_number_in_both_terms():
    """``cuda:01`` is device 1 (as torch reads it): the value a method sees is the canonical ``cuda:1``."""
    assert DEVICE.parse("cuda:01") == DEVICE.check("cuda:01") == "cuda:1"
    assert DEVICE.parse("cuda:00") == "cuda:0" and DEVICE.parse(" cuda:7 ") == "cuda:7"


def test_a_methods_string_reads_the_same_in_the_library_as_on_the_command_line():
    assert BASES.check("mv, ds") == BASES.parse("mv, ds") == ("mv", "ds")
    with pytest.raises(UsageError, match="bases lists 'mv' twice"):
        BASES.check("mv, mv")


def _family(root, name, text, modules=()):
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(text)
    for module, body in modules:
        (root / name / module).write_text(body)


@pytest.fixture
def odd_families(tmp_path, monkeypatch):
    """Families that misbehave in ways `extra_families` does not: a name declared twice in one family,
    a family that exits on import, a method whose module exits on import."""
    import crowdagg.methods
    from crowdagg.methods import registry

    root = tmp_path / "families"
    _family(root, "zz_twice_inside", "from ..registry import Method\nDECLARATIONS = (\n"
            "    Method('zz_same', 'crowdagg.methods.votes.mv:MajorityVote', 'first', 'm', 'r'),\n"
            "    Method('zz_same', 'crowdagg.methods.votes.wawa:Wawa', 'second', 'm', 'r'),\n)\n")
    _family(root, "zz_exits", "import sys\nsys.exit(3)\n")
    _family(root, "zz_exiting_module", "from ..registry import SEED, Method\nDECLARATIONS = (\n"
            "    Method('zz_exit', 'crowdagg.methods.zz_exiting_module.bye:Bye', 's', 'm', 'r', (SEED,)),\n)\n",
            [("bye.py", "raise SystemExit(4)\n")])
    monkeypatch.setattr(crowdagg.methods, "__path__", [*crowdagg.methods.__path__, str(root)])
    monkeypatch.setattr(registry, "METHODS", registry._Declarations())
    yield registry
    for name in [m for m in sys.modules if m.startswith("crowdagg.methods.zz_")]:
        del sys.modules[name]


def test_a_family_declaring_one_name_twice_fails_instead_of_keeping_one_silently(odd_families, bluebird):
    registry = odd_families
    assert "zz_same" not in registry.METHODS
    assert registry.failures()["crowdagg.methods.zz_twice_inside"] == (
        "TypeError: it declares a method name twice: 'zz_same'")
    assert aggregate(bluebird, "mv").method == "mv"


def test_a_family_or_method_module_that_exits_on_import_fails_alone(odd_families, bluebird):
    registry = odd_families
    assert registry.failures()["crowdagg.methods.zz_exits"] == "SystemExit: 3"
    assert "zz_exit" in registry.METHODS and "ds" in registry.METHODS
    with pytest.raises(UsageError) as info:
        registry.REGISTRY["zz_exit"]
    assert str(info.value) == ("method 'zz_exit' is unavailable: importing crowdagg.methods.zz_exiting_module.bye:Bye "
                               "failed (SystemExit: 4)")
    result = CliRunner().invoke(app, ["aggregate", BLUEBIRD, "-m", "zz_exit"])
    assert result.exit_code == 2 and result.stdout == "" and result.stderr == f"Error: {info.value}\n"


def test_a_method_without_parameters_is_shown_in_every_format(monkeypatch):
    from crowdagg.methods import registry

    spec = Method("bare", "crowdagg.methods.votes.mv:MajorityVote", "a method that takes nothing", "m", "r", rank=999)
    monkeypatch.setitem(registry.METHODS, "bare", spec)
    runner = CliRunner()
    text = runner.invoke(app, ["methods", "bare"])
    assert text.exit_code == 0 and text.stdout.endswith("\nParameters: none\n")
    csv = runner.invoke(app, ["methods", "bare", "-f", "csv"])
    assert csv.exit_code == 0 and csv.stdout == "parameter,type,default,range,paper,help\n" and csv.stderr == ""
    jsonl = runner.invoke(app, ["methods", "bare", "-f", "jsonl"])
    assert jsonl.exit_code == 0 and jsonl.stdout == ""


@pytest.mark.parametrize(("name", "words"), [
    ("n-init", "parameter 'n-init': a name must be a Python identifier (the CLI's -p n-init=... sets n_init)"),
    ("", "parameter '': a name must be a Python identifier"),
    ("2nd", "parameter '2nd': a name must be a Python identifier"),
])
def test_a_parameter_name_that_no_caller_could_set_is_refused_where_it_is_written(name, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        Param(name, int, 1, "h")


@pytest.mark.parametrize("name", ["callback", "max_memory", "task_col", "worker_col", "label_col", "gold",
                                  "init_workers", "data", "method"])
def test_a_parameter_named_like_an_argument_of_aggregate_is_refused(name):
    """``aggregate(data, method, callback=..., ...)`` would take it for itself: the method could never get it."""
    with pytest.raises(TypeError, match=re.escape(f"method 'x': parameter {name!r} is a name aggregate() and "
                                                  "the CLI keep for themselves")):
        Method("x", "m:C", "", "", "", (Param(name, int, 1, "h"),))


def test_the_reserved_names_are_aggregates_own_arguments():
    import inspect

    from crowdagg.methods import registry

    own = {p for p, v in inspect.signature(aggregate).parameters.items() if v.kind is not v.VAR_KEYWORD}
    assert set(registry.RESERVED) == own | {"gold", "init_workers"}


def test_a_family_that_asks_the_registry_while_it_is_imported_is_still_listed(tmp_path, monkeypatch):
    """Importing such a family first (``import crowdagg.methods.<family>``) runs discovery while the family is
    half imported: what that discovery finds must not be kept, or the family is silently left out."""
    import importlib

    import crowdagg.methods
    from crowdagg.methods import registry

    root = tmp_path / "families"
    _family(root, "zz_asks", "from ..registry import METHODS, SEED, Method\nBEFORE = len(METHODS)\n"
            "DECLARATIONS = (Method('zz_asker', 'crowdagg.methods.votes.mv:MajorityVote', 's', 'm', 'r', (SEED,)),)\n")
    monkeypatch.setattr(crowdagg.methods, "__path__", [*crowdagg.methods.__path__, str(root)])
    monkeypatch.setattr(registry, "METHODS", registry._Declarations())
    try:
        family = importlib.import_module("crowdagg.methods.zz_asks")
        assert family.BEFORE == len(METHODS)  # it saw the others
        assert "zz_asker" in registry.METHODS and registry.failures() == {}
    finally:
        sys.modules.pop("crowdagg.methods.zz_asks", None)


@pytest.mark.parametrize("value", ["0.5", "\u0663", " 1e-3 ", b"0.5"])
def test_a_float_parameter_takes_numbers_not_text_in_the_library(value):
    """As an int parameter does: text is the CLI's (``-p``, which refuses non-ASCII digits), not Python's."""
    p = Param("rate", float, 0.5, "h", 0.0, 10.0)
    with pytest.raises(UsageError, match=re.escape(f"rate must be a finite number in [0, 10], got {value!r}")):
        p.check(value)
    with pytest.raises(UsageError, match=re.escape(f"prior must be a sequence of numbers, each 0 .. 1, got {(value,)!r}")):
        PRIOR.check((value,))


def test_negative_zero_is_zero():
    p = Param("rate", float, 0.5, "h", 0.0, 10.0)
    for got in (p.check(-0.0), p.parse("-0"), PRIOR.check((-0.0, 1.0))[0], PRIOR.parse("-0,1")[0]):
        assert got == 0.0 and math.copysign(1.0, got) == 1.0


def test_a_bool_parameter_takes_numpys_bool_as_an_int_takes_numpys_ints():
    p = Param("flag", bool, False, "h")
    assert p.check(np.True_) is True and p.check(np.False_) is False
    with pytest.raises(UsageError, match=re.escape("flag must be true or false, got 1")):
        p.check(1)


def test_a_long_or_multi_line_value_is_named_by_its_type_in_one_line():
    """init=<a list of rows> or init=<a DataFrame> (posteriors not given as a numpy array): the error is one
    line naming what was given, not the value's whole repr (a DataFrame's is 14 lines)."""
    import numpy as np
    import pandas as pd

    for value, shown in (([[0.5, 0.5]] * 108, "a list"), (pd.DataFrame(np.full((108, 2), 0.5)), "a DataFrame")):
        with pytest.raises(UsageError) as err:
            INIT.check(value)
        text = str(err.value)
        assert "\n" not in text and len(text) < 100 + len(VALID_METHODS), text  # the names, not the value
        assert text == f"init must be soft-vote, hard-vote or a method ({VALID_METHODS}), got {shown}"
    with pytest.raises(UsageError, match=r"got 'nope'$"):  # short values are shown as they are
        INIT.check("nope")
    long_text = "x" * 100  # text is shown as typed, however long
    with pytest.raises(UsageError, match=f"got '{long_text}'$"):
        INIT.check(long_text)


# --------------------------------------------------------------------------- quick settings for tests
def test_every_iterative_method_declares_cheaper_quick_settings_than_its_defaults():
    """quick_params are declared parameters (checked at declaration) and cut the cost: a cap below the default."""
    from crowdagg.methods.registry import TRAINERS

    for name, m in {**METHODS, **TRAINERS}.items():
        for key, value in m.quick_params.items():
            assert m.param(key).check(value) == value, (name, key)
        for cap in ("max_iter", "epochs"):
            if cap in m.param_names:
                assert m.quick_params.get(cap, m.param(cap).default) < m.param(cap).default, (name, cap)


@pytest.mark.parametrize(("quick", "words"), [
    ({"nope": 1}, "method 'x': quick_params sets 'nope', which it does not declare"),
    ({"seed": -1}, "method 'x': quick_params: seed must be an integer in [0, 9223372036854775807], got -1"),
    ({"seed": "3"}, "method 'x': quick_params: seed must be an integer in [0, 9223372036854775807], got '3'"),
])
def test_quick_params_are_checked_where_they_are_declared(quick, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        Method("x", "m:C", "s", "model", "ref", (SEED,), quick_params=quick)


def test_quick_params_are_the_declarations_own_and_read_only():
    shared = {"seed": 3}
    m = Method("x", "m:C", "s", "model", "ref", (SEED,), quick_params=shared)
    shared["seed"] = 4  # a family's shared dict changed later: not this declaration
    assert dict(m.quick_params) == {"seed": 3}
    with pytest.raises(TypeError):
        m.quick_params["seed"] = 5  # type: ignore[index]
    assert hash(m) == hash(Method("x", "m:C", "s", "model", "ref", (SEED,)))  # hashable, settings aside


def test_numbers_of_a_declared_size_refuse_another_count_by_name():
    """A ``size`` on a "numbers" parameter is checked where every value is (Python and the CLI's text), before
    any data is read: the methods' two-number priors (bp, mf, deepmf, deepbp, bayesdgc) declare it."""
    from crowdagg.errors import UsageError
    from crowdagg.methods.registry import METHODS, TRAINERS, Param

    p = Param("prior", "numbers", (2.0, 1.0), "two pseudo-counts", 1e-6, 1e9, size=2)
    assert p.check([3, 0.5]) == (3.0, 0.5)
    with pytest.raises(UsageError, match=r"prior takes two numbers, got 1: two pseudo-counts"):
        p.check((2.0,))
    with pytest.raises(UsageError, match=r"prior takes two numbers, got 3"):
        p.parse("1,2,3")
    assert Param("w", "numbers", (1.0,), "any", size=0).check([1, 2, 3]) == (1.0, 2.0, 3.0)
    for spec in (METHODS["bp"], METHODS["mf"], TRAINERS["deepmf"], TRAINERS["deepbp"], TRAINERS["bayesdgc"]):
        assert {q.name: q for q in spec.params}["prior"].size == 2, spec.name
