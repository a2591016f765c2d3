"""The CLI package as a whole: the commands it registers, and what listing and help import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crowdagg.cli import app
from crowdagg.methods.registry import METHODS

ROOT = Path(__file__).resolve().parents[2]


def _method_modules() -> set[str]:
    """Every method module: ``crowdagg.methods.<family>.<module>`` on disk, and every registered target's module."""
    on_disk = {
        f"crowdagg.methods.{path.parent.name}.{path.stem}"
        for path in (ROOT / "crowdagg" / "methods").glob("*/*.py")
        if path.stem != "__init__"
    }
    return on_disk | {m.target.partition(":")[0] for m in METHODS.values()}


def test_every_registered_method_has_a_module_on_disk():
    # the laziness test below is only as good as this list: it must name every method's module
    modules = _method_modules()
    assert {"crowdagg.methods.em.ds", "crowdagg.methods.votes.mv", "crowdagg.methods.votes.wawa"} <= modules
    for name in modules:
        assert (ROOT / (name.replace(".", "/") + ".py")).exists(), name


@pytest.mark.parametrize("args", [["--help"], ["methods"]])
def test_help_and_methods_import_no_method_code_numba_or_pandas(args):
    # the real entry point (signals, then the CLI), in a fresh interpreter
    code = (
        "import json, sys\n"
        "from crowdagg._entry import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    assert ("aggregate" if args == ["--help"] else "onecoin") in proc.stdout  # it did run the command
    loaded = set(report["modules"])
    assert "crowdagg.cli.aggregate" in loaded and "crowdagg.methods.registry" in loaded  # the check can see
    assert not {m for m in loaded if m.split(".")[0] in ("numba", "pandas", "dask", "distributed")}
    assert not loaded & _method_modules()


def test_aggregate_on_the_local_engine_never_imports_dask():
    """Only ``--engine dask`` imports dask and distributed (the optional extra)."""
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom crowdagg.cli import app\n"
            "r = CliRunner().invoke(app, ['aggregate', 'example:bluebird', '-m', 'mv'])\n"
            "assert r.exit_code == 0, r.stderr\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_commands_in_help_order():
    assert [c.name for c in app.registered_commands] == ["aggregate", "workers", "stats", "evaluate", "simulate",
                                                         "train", "predict", "methods"]


@pytest.mark.parametrize("columns", ["80", "60"])
def test_every_commands_line_in_the_help_is_a_whole_sentence(monkeypatch, columns):
    """`crowdagg --help` cut the workers and evaluate lines at 45 characters, mid-word ("who..."): every command
    declares its line, a sentence that ends with a full stop, and the listing shows all of it."""
    import typer
    from typer.testing import CliRunner

    monkeypatch.setenv("COLUMNS", columns)
    group = typer.main.get_command(app)
    out = CliRunner().invoke(app, ["--help"]).stdout
    listing = " ".join(out.split("Commands:")[1].split())
    assert "..." not in listing
    for name, command in group.commands.items():
        short = command.short_help
        assert short and short.endswith(".") and short[0].isupper(), name
        assert len(name) + len(short) <= 80 - 6, name  # one line beside the name at 80 columns
        assert f"{name} {short}" in listing, name


@pytest.mark.parametrize("columns", ["80", "40"])
def test_every_example_in_a_commands_help_is_one_whole_line(monkeypatch, columns):
    """simulate's examples were wrapped as prose: at 80 columns `--per-task` was cut at its hyphen ('--per-' and
    'task' on two lines), so a copied example failed.  Every 'Example:' line of each command's help is shown
    whole, at any width."""
    import typer
    from typer.testing import CliRunner

    monkeypatch.setenv("COLUMNS", columns)
    for name, command in typer.main.get_command(app).commands.items():
        out = CliRunner().invoke(app, [name, "--help"]).stdout
        shown = {line.strip() for line in out.splitlines()}
        for line in (command.help or "").splitlines():
            if line.strip().startswith("Example:"):
                assert line.strip() in shown, (name, line)


def test_an_interrupt_python_wrapped_is_said_as_an_interrupt_not_an_unexpected_failure(capsys):
    """A SIGINT inside an import's ``__set_name__`` reached the command as RuntimeError("Error calling
    __set_name__ ..."): it was 'Error: unexpected failure' and exit 1 where an interrupt is exit 130."""
    import typer

    from crowdagg.cli.plumbing import handle_errors
    from crowdagg.errors import Interrupted

    @handle_errors()
    def by_handler() -> None:
        raise RuntimeError("Error calling __set_name__") from Interrupted(2, "SIGINT")

    with pytest.raises(Interrupted) as caught:  # the entry point says it and exits 128 + the signal
        by_handler()
    assert caught.value.exit_code == 130

    @handle_errors()
    def by_python() -> None:
        raise RuntimeError("Error calling __set_name__") from KeyboardInterrupt()

    with pytest.raises(typer.Exit) as stopped:
        by_python()
    assert stopped.value.exit_code == 130
    assert capsys.readouterr().err.strip().splitlines() == ["Error: interrupted"]


def test_the_entry_point_says_an_interrupt_wrapped_during_its_imports(monkeypatch, capfd):
    from crowdagg import _entry
    from crowdagg.cli import run as _  # noqa: F401 - imported before the patch
    from crowdagg.errors import Interrupted

    def wrapped(argv):
        raise RuntimeError("Error calling __set_name__") from Interrupted(2, "SIGINT")

    monkeypatch.setattr("crowdagg.cli.run", wrapped)
    monkeypatch.setattr("crowdagg.core.signals.install", lambda: None)
    assert _entry.main(["aggregate"]) == 130
    assert capfd.readouterr().err == "Error: interrupted\n"
