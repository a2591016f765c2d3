"""``crowdagg train``: the design card's one-liner on a dataset folder, its outputs, its refusals (CPU, tiny epochs)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from tests.cli.test_cli import first_line_then_quiet

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--epochs", "3", "--hidden", "16", "--device", "cpu")
N_EXTRA = 15  # tasks with features and no answers


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])  # this checkout's crowdagg
    return env


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def ok(result):
    assert result.exit_code == 0, result.stderr
    return result


def one_error(result, code):
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ") and "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    return lines[-1]


def write_folder(folder: Path, n_tasks=300, n_extra=N_EXTRA, seed=3) -> Path:
    """A dataset folder as the real ones are laid out: feats.npy, tasks.txt, labels.csv, truth.csv; the last
    ``n_extra`` feature rows belong to tasks nobody labelled."""
    from crowdagg.simulate import simulate
    from crowdagg.simulate.features import gaussian_features

    crowd = simulate(n_tasks=n_tasks + n_extra, n_workers=10, n_classes=3, per_task=4, seed=seed)
    data = crowd.to_annotations()
    names = np.asarray(data.task_names)
    truth = crowd.truth[np.array([int(t[1:]) for t in names])]
    x = gaussian_features(truth, 3, dim=8, separation=5.0, seed=seed + 1)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "feats.npy", x)
    (folder / "tasks.txt").write_text("\n".join(names) + "\n")
    classes = np.asarray(data.classes, dtype=object)
    answers = pd.DataFrame({"task": names[data.task], "worker": data.worker_names[data.worker],
                            "label": classes[data.label]})
    answers[~answers["task"].isin(names[-n_extra:])].to_csv(folder / "labels.csv", index=False)
    pd.DataFrame({"task": names, "label": classes[truth]}).to_csv(folder / "truth.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_folder(tmp_path_factory.mktemp("crowd"))


@pytest.fixture(scope="module")
def trained(folder, tmp_path_factory):
    """One run with every output: (result, out dir)."""
    out = tmp_path_factory.mktemp("out")
    result = invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "--proba", *SMALL,
                    "--epochs", "20", "--workers", out / "confusions.csv", "--save", out / "model.pt",
                    "--truth", folder / "truth.csv")
    return ok(result), out


def frame(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), dtype={"task": str, "label": str})


# --------------------------------------------------------------------------- the design card
@pytest.mark.quick("crowdlayer")  # the trainers' real-data test: 2 epochs on music
def test_the_design_card_one_liner_on_a_dataset_folder(tmp_path, datasets_dir):
    """``crowdagg train --features feats.npy --method crowdlayer`` in a copy of the music folder."""
    for name in ("labels.csv", "tasks.txt"):
        shutil.copy(datasets_dir / "music" / name, tmp_path / name)
    shutil.copy(datasets_dir / "music" / "features.npy", tmp_path / "feats.npy")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = ok(invoke("train", "--features", "feats.npy", "--method", "crowdlayer", "--epochs", "2",
                           "--hidden", "16"))
    finally:
        os.chdir(cwd)
    out = frame(result.stdout)
    assert list(out.columns) == ["task", "label", "confidence"]
    tasks = (tmp_path / "tasks.txt").read_text().split()
    assert len(out) == 700 and sorted(out["task"]) == sorted(tasks)
    assert set(out["label"]) <= set(pd.read_csv(tmp_path / "labels.csv", dtype=str)["label"])
    first, kept = result.stderr.splitlines()
    assert first == "train: using labels labels.csv and tasks tasks.txt (beside the features)"
    assert re.fullmatch(r"train: kept epoch [12] of 2 \(held-out answer NLL \d+\.\d{4}\); ran all 2 epochs", kept)


def test_every_task_with_features_gets_a_row_and_the_unlabelled_ones_have_no_answers(trained, folder):
    result, _ = trained
    out = frame(result.stdout)
    names = (folder / "tasks.txt").read_text().split()
    assert list(out.columns) == ["task", "label", "confidence", "n_answers", "p_0", "p_1", "p_2"]
    assert out["task"].tolist()[-N_EXTRA:] == names[-N_EXTRA:] and sorted(out["task"]) == sorted(names)
    assert (out["n_answers"].iloc[-N_EXTRA:] == 0).all() and (out["n_answers"].iloc[:-N_EXTRA] > 0).all()
    np.testing.assert_allclose(out[["p_0", "p_1", "p_2"]].sum(axis=1), 1.0, atol=1e-12)


def test_the_separable_problem_is_learnt_and_truth_only_reports(trained, folder):
    result, _ = trained
    out = frame(result.stdout).merge(pd.read_csv(folder / "truth.csv", dtype=str), on="task", suffixes=("", "_t"))
    lines = [line for line in result.stderr.splitlines() if not line.startswith("train: kept epoch")]
    assert (out["label"] == out["label_t"]).mean() > 0.9, lines
    assert lines[1].startswith("inferred training labels: accuracy ") and "(300 tasks compared" in lines[1]
    assert lines[2].startswith("classifier alone: accuracy ")
    assert lines[3].startswith(f"classifier on the {N_EXTRA} tasks without answers: accuracy ")
    assert float(lines[2].split()[3]) > 0.9
    plain = ok(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "--proba", *SMALL,
                      "--epochs", "20", "-q"))
    assert plain.stdout == result.stdout and "accuracy" not in plain.stderr  # --truth never selects
    assert plain.stderr == (f"Warning: {N_EXTRA} task(s) have no answers: their posterior is the classifier's "
                            "prediction (n_answers = 0 in the output)\n")


def test_workers_are_the_confusions_in_aggregates_long_format(trained):
    _, out = trained
    conf = pd.read_csv(out / "confusions.csv", dtype={"worker": str, "true_label": str, "observed_label": str})
    assert list(conf.columns) == ["worker", "true_label", "observed_label", "probability", "accuracy", "n_answers"]
    assert len(conf) == 10 * 9
    sums = conf.groupby(["worker", "true_label"])["probability"].sum()
    np.testing.assert_allclose(sums, 1.0, atol=1e-9)


def test_same_seed_same_bytes(folder, trained):
    result, _ = trained
    again = ok(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "--proba", *SMALL,
                      "--epochs", "20", "-q"))
    assert again.stdout == result.stdout
    other = ok(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "--proba", *SMALL,
                      "--epochs", "20", "-q", "--seed", "7"))
    assert other.stdout != result.stdout


def test_explicit_labels_and_tasks_and_a_table_of_features(folder, tmp_path):
    x = np.load(folder / "feats.npy")
    names = (folder / "tasks.txt").read_text().split()
    table = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    table.insert(0, "item", names)
    table.iloc[::-1].to_parquet(tmp_path / "feats.parquet")  # rows in another order: aligned by id
    shutil.copy(folder / "labels.csv", tmp_path / "answers.csv")
    by_table = ok(invoke("train", "--features", tmp_path / "feats.parquet", "--id-col", "item", "--labels",
                         tmp_path / "answers.csv", "--method", "crowdlayer", *SMALL))
    by_array = ok(invoke("train", "--features", folder / "feats.npy", "--tasks", folder / "tasks.txt", "--labels",
                         folder / "labels.csv", "--method", "crowdlayer", *SMALL))
    a, b = frame(by_table.stdout), frame(by_array.stdout)
    # the answered tasks in the answers' order, then the feature-only ones in the features' order
    assert a["task"].tolist()[:-N_EXTRA] == b["task"].tolist()[:-N_EXTRA]
    assert a["task"].tolist()[-N_EXTRA:] == b["task"].tolist()[-N_EXTRA:][::-1]
    assert "using" not in by_array.stderr + by_table.stderr  # nothing defaulted: nothing said


def test_reads_answers_with_aggregates_options(folder, tmp_path):
    answers = pd.read_csv(folder / "labels.csv", dtype=str).rename(columns={"task": "item", "worker": "who",
                                                                           "label": "answer"})
    answers.to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    result = ok(invoke("train", "--features", folder / "feats.npy", "--tasks", folder / "tasks.txt", "--labels",
                       tmp_path / "a.tsv", "--task-col", "item", "--worker-col", "who", "--label-col", "answer",
                       "--classes", "0,1,2,3", "--method", "crowdlayer", *SMALL, "--proba", "-f", "jsonl"))
    first = pd.read_json(io.StringIO(result.stdout), lines=True, dtype=False).iloc[0]
    assert "p_3" in first.index  # --classes adds the class nobody chose


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("option", ["-o", "--workers", "--save"])
@pytest.mark.parametrize("victim", ["labels.csv", "feats.npy", "tasks.txt", "truth.csv"])
def test_an_output_that_is_an_input_is_refused_and_nothing_is_written(folder, tmp_path, option, victim):
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    other = tmp_path / "other.csv"
    args = ["train", "--features", folder / "feats.npy", "--truth", folder / "truth.csv", "--method", "crowdlayer",
            *SMALL, option, folder / victim]
    if option != "-o":
        args += ["-o", other]
    err = one_error(invoke(*args), 2)
    assert "is also an input" in err and victim in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not other.exists()


def test_an_aggregator_gets_the_registrys_message():
    err = one_error(invoke("train", "--features", "nowhere.npy", "--method", "ds"), 2)
    assert err.startswith("Error: 'ds' is an aggregation method (crowdagg aggregate --method ds), not a trainer")


def test_labels_are_needed_when_none_are_beside_the_features(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((3, 2)))
    err = one_error(invoke("train", "--features", tmp_path / "f.npy", "--method", "crowdlayer"), 2)
    assert err == f"Error: --labels is needed: no labels.csv beside --features {tmp_path / 'f.npy'}"


def test_features_without_ids_are_refused_for_training(folder, tmp_path):
    shutil.copy(folder / "feats.npy", tmp_path / "feats.npy")
    err = one_error(invoke("train", "--features", tmp_path / "feats.npy", "--labels", folder / "labels.csv",
                           "--method", "crowdlayer", *SMALL), 2)
    assert "have no task ids" in err and "--tasks" in err


def test_answers_for_tasks_without_features_are_named(folder, tmp_path):
    labels = pd.read_csv(folder / "labels.csv", dtype=str)
    pd.concat([labels, pd.DataFrame({"task": ["ghost"], "worker": ["w1"], "label": ["0"]})]).to_csv(
        tmp_path / "labels.csv", index=False)
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--tasks", folder / "tasks.txt",
                           "--labels", tmp_path / "labels.csv", "--method", "crowdlayer", *SMALL), 1)
    assert err.startswith("Error: 1 of the 301 answered tasks have no row in features") and "'ghost'" in err


def test_a_bad_features_file_is_one_error_line(folder, tmp_path):
    x = np.load(folder / "feats.npy")
    x[5, 2] = np.nan
    np.save(tmp_path / "feats.npy", x)
    for name in ("labels.csv", "tasks.txt"):
        shutil.copy(folder / name, tmp_path / name)
    err = one_error(invoke("train", "--features", tmp_path / "feats.npy", "--method", "crowdlayer", *SMALL), 1)
    assert "row 5" in err and "feature 2 is nan" in err


def test_bad_parameters_are_refused_before_reading(tmp_path):
    missing = tmp_path / "nothing-here.npy"
    assert "--epochs" in one_error(invoke("train", "--features", missing, "--method", "crowdlayer", "--epochs", "0"),
                                   2)
    assert "-p dropout" in one_error(invoke("train", "--features", missing, "--method", "crowdlayer", "-p",
                                            "dropout=2"), 2)
    assert "--model" in one_error(invoke("train", "--features", missing, "--method", "crowdlayer", "--model",
                                         "resnet"), 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_a_clear_error(tmp_path):
    err = one_error(invoke("train", "--features", tmp_path / "f.npy", "--method", "crowdlayer", "--device", "cuda"),
                    2)
    assert "CUDA is not available here" in err and "--device cpu" in err


# --------------------------------------------------------------------------- subprocesses
NO_TORCH = ("import sys\nsys.modules['torch'] = None\nfrom crowdagg.cli import run\n"
            "code = run(sys.argv[1:])\nassert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "sys.exit(code)\n")


@pytest.mark.parametrize("args", [
    ["train", "--features", "not-read.npy", "--method", "crowdlayer"],
    ["train", "--features", "not-read.npy"],
    ["predict", "--model", "not-read.pt", "--features", "not-read.npy"],
])
def test_without_torch_train_and_predict_say_which_extra_to_install(args, tmp_path):
    done = subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: ")
    assert "pip install 'crowdagg[train]'" in done.stderr and "torch" in done.stderr


def test_without_torch_methods_lists_the_trainers_as_needing_the_extra(tmp_path):
    done = subprocess.run([sys.executable, "-c", NO_TORCH, "methods"], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("crowdlayer "))
    assert line.endswith(" [needs: pip install 'crowdagg[train]']")
    assert not any(ln.startswith("ds ") and "[needs" in ln for ln in done.stdout.splitlines())


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["predict", "--help"], ["methods"],
                                  ["methods", "crowdlayer"], ["methods", "-f", "csv"]])
def test_help_and_methods_import_no_torch(args):
    # the families' __init__ (their declarations, standard library only) are read; their method modules never
    code = ("import sys\nfrom crowdagg.cli import run\nrun(sys.argv[1:])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith("
            "'crowdagg.learning.trainer') or (m.startswith('crowdagg.learning.methods.') and m.count('.') > 3)))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_closed_pipe_ends_training_output_quietly(tmp_path):
    """``crowdagg train ... | head -1``: 4,000 rows with --proba, well over a pipe buffer."""
    folder = write_folder(tmp_path / "big", n_tasks=4000, n_extra=10, seed=5)
    first = first_line_then_quiet(["train", "--features", str(folder / "feats.npy"), "--method", "crowdlayer",
                                   "--epochs", "1", "--model", "linear", "--proba", "-q"], env=_env())
    assert first.startswith("task,label,confidence,n_answers,p_0")


def test_the_progress_bar_counts_epochs_on_a_terminal_only(monkeypatch):
    from crowdagg.cli import plumbing

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    update, stop = plumbing.progress(False, total=4, what="epoch", measure="held-out NLL")
    assert update is not None
    for epoch in range(1, 5):
        update(epoch, 1.0 / epoch)
    stop()
    assert "epochs" in screen.getvalue() and "4/4" in screen.getvalue() and "held-out NLL 0.25" in screen.getvalue()
    assert plumbing.progress(True, total=4)[0] is None  # --quiet
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert plumbing.progress(False, total=4)[0] is None  # not a terminal


def test_an_unknown_parameter_lists_the_options_and_the_p_parameters_as_what_they_are():
    """``-p bogus=1`` listed --dropout, --lam, --confusion-init, --confusion-lr-scale, which are not options."""
    err = one_error(invoke("train", "--features", "nowhere.npy", "-m", "geocrowdnet-f", "-p", "bogus=1"), 2)
    assert err == ("Error: method 'geocrowdnet-f' does not take -p bogus; it takes: --seed, --model, --hidden, "
                   "--epochs, --batch-size, --lr, --weight-decay, --device, --val-fraction, --patience; and "
                   "-p NAME=VALUE for: dropout, lam, confusion_init, confusion_lr_scale")
    err = one_error(invoke("aggregate", "nowhere.csv", "-m", "ds", "-p", "bogus=1"), 2)
    assert err == ("Error: method 'ds' does not take -p bogus; it takes: --seed, --max-iter, --tol, --smoothing; "
                   "and -p NAME=VALUE for: n_init, init")
    for option in ("--seed", "--model", "--hidden", "--epochs", "--batch-size", "--lr", "--weight-decay",
                   "--device", "--val-fraction", "--patience"):  # each option listed is one train has
        assert option in invoke("train", "--help").stdout


@pytest.mark.parametrize("name, why", [
    ("model.csv", "a trained model is a safetensors file, not .csv; name it .safetensors or .pt"),
    ("model.parquet", "a trained model is a safetensors file, not .parquet; name it .safetensors or .pt"),
    ("x.gz", "a trained model is not compressed (any safetensors reader opens it); name it .safetensors or .pt"),
    ("model.pt.gz", "a trained model is not compressed"),
])
def test_save_under_another_name_than_a_models_is_refused_before_reading(folder, tmp_path, name, why):
    """``--save model.csv`` wrote safetensors under a .csv name while ``-o x.xlsx`` and ``--save-workers
    x.parquet`` were refused: one rule for every output's name."""
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--tasks", folder / "tasks.txt",
                           "--method", "crowdlayer", *SMALL, "-o", tmp_path / "out.csv", "--save", tmp_path / name), 2)
    assert err.startswith(f"Error: --save {tmp_path / name}: {why}")
    assert list(tmp_path.iterdir()) == []
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer",
                           "-o", tmp_path / "out.xlsx"), 2)
    assert "unknown output extension '.xlsx'" in err


def test_a_hidden_layer_too_large_for_max_memory_is_refused_with_its_size(folder, tmp_path):
    """A --hidden asking for gigabytes was an "unexpected failure" of torch's allocator under --max-memory."""
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--tasks", folder / "tasks.txt",
                           "--method", "crowdlayer", "--epochs", "1", "--device", "cpu", "--hidden", "65536",
                           "--max-memory", "100M", "-o", tmp_path / "out.csv", "--save", tmp_path / "m.pt"), 1)
    assert err.startswith("Error: this needs ~")
    assert ("a mlp network of 786,451 weights (--hidden=65536) trained on batches of 64 tasks), more than the limit "
            "of 100 MB (--max-memory=100 MB); use fewer tasks, or a smaller --hidden or --batch-size") in err
    assert list(tmp_path.iterdir()) == []


def test_the_answers_are_named_by_their_option_in_refusals(folder):
    """train has no INPUT argument: its answers were named "INPUT labels.csv" in the refusals."""
    labels = folder / "labels.csv"
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--labels", labels, *SMALL, "--save", labels), 2)
    assert err == f"Error: --save {labels} is also an input (--labels {labels}); refusing to overwrite it"
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--labels", "-", "--truth", "-", *SMALL), 2)
    assert "(--labels - and --truth -)" in err and "INPUT" not in err


# --------------------------------------------------------------------------- the help's trainers, torch's threads
def test_train_help_lists_every_trainer_as_aggregate_help_lists_the_methods():
    """``train --help`` said "Trainer (see `crowdagg methods`)" where ``aggregate --help`` lists its methods: the
    same list from :data:`~crowdagg.methods.registry.TRAINERS` (their declarations: no torch imported)."""
    from crowdagg.methods.registry import TRAINERS

    code = ("import sys\nfrom crowdagg.cli import run\ncode = run(sys.argv[1:])\n"
            "print('TORCH', sorted(m for m in sys.modules if m.split('.')[0] == 'torch'), file=sys.stderr)\n"
            "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code, "train", "--help"], capture_output=True, text=True,
                          timeout=300, env={**_env(), "COLUMNS": "80"}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "TORCH []"
    lines = done.stdout.splitlines()
    start = lines.index("  Trainers (`crowdagg methods NAME` shows one in full):")
    block = lines[start + 1:lines.index("", start)]
    entries: dict[str, list[str]] = {}
    for line in block:  # a trainer's line: its name at column 4; its summary's further lines under the summary
        if line[4] != " ":
            entries[line.split()[0]] = [line.split(None, 1)[1]]
        else:
            assert line.startswith(" " * (6 + max(map(len, TRAINERS)))), line
            entries[list(entries)[-1]].append(line.strip())
    assert list(entries) == list(TRAINERS)
    assert {name: " ".join(text) for name, text in entries.items()} == {n: m.summary for n, m in TRAINERS.items()}
    assert max(map(len, block)) <= 80
    assert max(map(len, lines)) <= 80, max(lines, key=len)  # the example was 101 columns
    assert "    crowdlayer " not in invoke("aggregate", "--help").stdout  # aggregate's list is the aggregators'


def _torch_threads_in_training(monkeypatch, *args, env=None) -> set[int]:
    """torch's thread count at every backward pass of a ``train`` run (the whole of training, whichever trainer)."""
    counts: set[int] = set()
    backward = torch.Tensor.backward

    def spy(self, *a, **k):
        counts.add(torch.get_num_threads())
        return backward(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "backward", spy)
    before = torch.get_num_threads()
    result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    assert result.exit_code == 0, result.stderr
    assert torch.get_num_threads() == before  # restored after the fit
    return counts


def test_torch_runs_on_the_given_count_else_on_one_thread_for_a_small_network(folder, monkeypatch):
    """torch ran on all cores when nobody gave a count; on a shared 2-core machine two threads were up to 60× slower
    an epoch than one.  A count given (--threads, CROWDAGG_THREADS) still wins."""
    from crowdagg.core import threads

    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.setattr(threads, "all_cores", lambda: 8)  # a machine where the old default was 8 threads
    run = ("train", "--features", folder / "feats.npy", "--method", "crowdlayer", "-q", *SMALL)
    assert _torch_threads_in_training(monkeypatch, *run) == {1}
    assert _torch_threads_in_training(monkeypatch, *run, "--threads", "2") == {2}
    assert _torch_threads_in_training(monkeypatch, *run, env={threads.ENV: "3"}) == {3}
    assert _torch_threads_in_training(monkeypatch, *run, "--threads", "2", env={threads.ENV: "3"}) == {2}


def test_task_params_writes_every_task_once_with_its_answers(folder, tmp_path):
    """--task-params as aggregate's: one row per task with features (the unanswered ones with n_answers 0), in
    the labels' order; a trainer without per-task parameters writes task and n_answers."""
    out = tmp_path / "tasks.csv"
    labels = frame(ok(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", *SMALL,
                             "--epochs", "1", "--task-params", out)).stdout)
    table = pd.read_csv(out, dtype={"task": str})
    assert list(table.columns) == ["task", "n_answers"]
    assert list(table["task"]) == list(labels["task"]) and table["task"].is_unique
    answers = pd.read_csv(folder / "labels.csv", dtype={"task": str})
    counts = answers.groupby("task").size()
    assert (table.set_index("task")["n_answers"] == counts.reindex(table["task"]).fillna(0).to_numpy()).all()
    assert (table["n_answers"] == 0).sum() == N_EXTRA


@pytest.mark.parametrize("victim", ["labels.csv", "feats.npy", "tasks.txt"])
def test_task_params_onto_an_input_is_refused_and_nothing_is_written(folder, tmp_path, victim):
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    other = tmp_path / "other.csv"
    err = one_error(invoke("train", "--features", folder / "feats.npy", "--method", "crowdlayer", *SMALL,
                           "-o", other, "--task-params", folder / victim), 2)
    assert "--task-params" in err and "is also an input" in err and victim in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not other.exists()
