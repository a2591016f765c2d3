"""The README against the code: what it lists and the commands it shows cannot drift from the tool.

* The Dask engine's method list is written from the registry (a method runs on Dask when its declaration
  names the ``dask`` engine: :func:`crowdagg.methods.api.check_engine` refuses the others).  The README
  holds it between ``<!-- dask-methods ... -->`` and ``<!-- /dask-methods -->``; after adding a method,
  ``python tests/test_readme.py --write`` rewrites it.
* Every ``crowdagg ...`` command in a fenced shell block of README.md and benchmarks/README.md parses:
  the subcommand exists, its options exist and take the values shown, and its ``-p name=value`` items are
  parameters of the method named (nothing is run, no file is read).
* Every ``#anchor`` link between the two pages names a heading that exists.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCH_README = ROOT / "benchmarks" / "README.md"

BEGIN = re.compile(r"^<!-- dask-methods\b.*-->\n", re.M)
END = "<!-- /dask-methods -->"


# --------------------------------------------------------------------------- the Dask methods list
def _spoken(names: list[str]) -> str:
    """```a``, ``b`` and ``c``` (code spans, the last joined by "and")."""
    spans = [f"`{n}`" for n in names]
    return spans[0] if len(spans) == 1 else ", ".join(spans[:-1]) + " and " + spans[-1]


def dask_methods_text(methods: Mapping[str, Any] | None = None) -> str:
    """The README's lines between the markers: the methods whose declaration names the ``dask`` engine, then
    the local-only ones, in registry order (the order ``crowdagg methods`` lists)."""
    if methods is None:
        from crowdagg.methods.registry import METHODS as methods
    on_dask = [name for name, m in methods.items() if "dask" in m.engines]
    local = [name for name, m in methods.items() if "dask" not in m.engines]
    text = f"It runs {_spoken(on_dask)}"
    return text + (f";\n{_spoken(local)} {'is' if len(local) == 1 else 'are'} local-only.\n" if local else ".\n")


def _block_span(text: str) -> tuple[int, int]:
    begin = BEGIN.search(text)
    end = text.find(END)
    assert begin is not None and end > begin.end(), (
        "README.md lost its '<!-- dask-methods ... -->' ... '<!-- /dask-methods -->' markers"
    )
    return begin.end(), end


def test_dask_methods_list_is_the_registrys():
    text = README.read_text(encoding="utf-8")
    start, end = _block_span(text)
    assert text[start:end] == dask_methods_text(), (
        "README.md's Dask methods list differs from the registry; run: python tests/test_readme.py --write"
    )


def test_dask_methods_text_follows_the_declarations():
    """The list is the declarations' engines, in their order; a method declared local-only leaves it."""
    def spec(*engines: str) -> SimpleNamespace:
        return SimpleNamespace(engines=engines)

    assert dask_methods_text({"a": spec("local", "dask"), "b": spec("local"), "c": spec("local", "dask")}) == (
        "It runs `a` and `c`;\n`b` is local-only.\n")
    assert dask_methods_text({"a": spec("local", "dask")}) == "It runs `a`.\n"
    assert dask_methods_text({"a": spec("local", "dask"), "b": spec("local", "dask"), "c": spec("dask"),
                              "d": spec("local"), "e": spec("local")}) == (
        "It runs `a`, `b` and `c`;\n`d` and `e` are local-only.\n")


# --------------------------------------------------------------------------- the commands shown
SHELL_INFO = {"", "sh", "bash", "shell", "console"}
OPERATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {">", ">>", "<", ">&", "<&", ">|"}


def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(info string, first line number, lines) of every ```-fenced block."""
    blocks, info, start, lines = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if info is None:
                info, start, lines = line[3:].strip(), number + 1, []
            else:
                blocks.append((info, start, lines))
                info = None
        elif info is not None:
            lines.append(line)
    return blocks


def crowdagg_commands(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, argv after ``crowdagg``) of every ``crowdagg`` command in the file's shell blocks,
    pipes, ``&&`` chains and redirections taken apart the way the shell does."""
    found = []
    for info, start, lines in fenced_blocks(path.read_text(encoding="utf-8")):
        if info not in SHELL_INFO:
            continue
        for offset, line in enumerate(lines):
            line = line.removeprefix("$ ")
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            try:
                tokens = list(lexer)
            except ValueError:  # an output line (unbalanced quotes in a table), not a command
                continue
            segment: list[str] = []
            for token in tokens + [";"]:
                if token in OPERATORS:
                    if segment and (segment[0] == "crowdagg" or segment[0].endswith("/crowdagg")):
                        found.append((start + offset, _without_redirects(segment[1:])))
                    segment = []
                else:
                    segment.append(token)
    return found


def _without_redirects(argv: list[str]) -> list[str]:
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in REDIRECTS:
            skip = True
        else:
            out.append(token)
    return out


def check_command(argv: list[str]) -> None:
    """Parse ``crowdagg ARGV`` as the CLI would, without running it: raises on an unknown subcommand or
    option, a bad option value, or a ``-p`` item the method does not take."""
    import typer

    from crowdagg.cli import app
    from crowdagg.cli.options import PARAM_FLAGS, method_params
    from crowdagg.methods.api import check_engine
    from crowdagg.methods.registry import METHODS, TRAINERS, get, get_trainer

    group = typer.main.get_command(app)
    if not argv or argv[0] in ("--help", "-h", "--version"):
        return
    command = group.get_command(None, argv[0])  # type: ignore[arg-type]
    assert command is not None, f"no subcommand {argv[0]!r}"
    with group.make_context("crowdagg", [], resilient_parsing=True) as parent:
        ctx = command.make_context(argv[0], list(argv[1:]), parent=parent)
    params = ctx.params
    if argv[0] == "methods":
        if params.get("name"):
            assert params["name"] in METHODS or params["name"] in TRAINERS, f"no method {params['name']!r}"
        return
    if "param_" not in params:
        return
    spec = get_trainer(params["method"]) if argv[0] == "train" else get(params.get("method") or "ds")
    flags = {k: params[k] for k in PARAM_FLAGS if params.get(k) is not None}
    chosen = method_params(spec, flags, list(params["param_"]))
    if params.get("engine"):
        check_engine(spec.name, params["engine"], chosen)


def _message(exc: BaseException) -> str:
    """Click's message for its own errors (``format_message``), ``str`` for the others."""
    fmt = getattr(exc, "format_message", None)
    return fmt() if callable(fmt) else str(exc)


COMMANDS = [(path, n, argv) for path in (README, BENCH_README) for n, argv in crowdagg_commands(path)]


def test_the_readme_shows_commands():
    """The extraction finds the quick start's commands (a guard against a parser that finds nothing)."""
    shown = {" ".join(argv) for path, _, argv in COMMANDS if path == README}
    assert "aggregate labels.csv" in shown
    assert "evaluate labels_agg.csv --truth gold.csv" in shown
    assert len(shown) >= 30


@pytest.mark.parametrize(("path", "line", "argv"), COMMANDS,
                         ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in COMMANDS])
def test_every_crowdagg_command_shown_parses(path, line, argv):
    try:
        check_command(argv)
    except Exception as exc:  # a Typer/Click usage error, or crowdagg's UsageError for -p
        pytest.fail(f"{path.relative_to(ROOT)}:{line}: crowdagg {shlex.join(argv)}\n  {type(exc).__name__}: "
                    f"{_message(exc)}")


@pytest.mark.parametrize(("argv", "says"), [
    (["aggregat", "labels.csv"], "no subcommand 'aggregat'"),
    (["aggregate", "labels.csv", "--bogus"], "No such option: --bogus"),
    (["aggregate", "labels.csv", "--seed", "abc"], "'--seed'"),
    (["aggregate", "labels.csv", "-m", "mv", "-p", "prior=2,1"], "does not take -p prior"),
    (["aggregate", "labels.csv", "-m", "mv", "--smoothing", "0.1"], "--smoothing does not apply to method 'mv'"),
    (["aggregate", "labels.csv", "-m", "bp", "-p", "prior=abc"], "prior"),
    (["aggregate", "labels.csv", "-m", "glad", "--engine", "dask"], "runs on the local engine only"),
    (["evaluate", "labels_agg.csv"], "Missing option '--truth'"),
    (["methods", "nosuch"], "no method 'nosuch'"),
])
def test_check_command_refuses_what_the_cli_refuses(argv, says):
    """The dry parse is not a rubber stamp: each of these is an error the CLI gives too."""
    with pytest.raises(Exception) as caught:
        check_command(argv)
    assert says in _message(caught.value)


def test_check_command_passes_what_the_guide_names():
    """The inline examples of the method guide (not in a fenced block) parse too."""
    for argv in (["aggregate", "labels.csv", "-m", "bp", "-p", "prior=2,1", "-o", "labels_agg.csv"],
                 ["aggregate", "labels.csv", "-m", "ds", "--smoothing", "0.1"],
                 ["aggregate", "labels.csv", "-m", "bp", "-p", "worker_model=confusion"],
                 ["aggregate", "labels.csv", "-m", "multispa", "-p", "refine=ds"],
                 ["aggregate", "labels.csv", "-m", "cnmf", "-p", "refine=ds"],
                 ["aggregate", "labels.csv", "-m", "cpd", "-p", "refine=ds"],
                 ["train", "--features", "feats.npy", "--method", "geocrowdnet"]):
        check_command(argv)


def test_no_output_is_named_truth():
    """Writing ``truth.csv`` inside a dataset folder replaces its known-correct labels: the docs never show it."""
    for path in (README, BENCH_README):
        for n, argv in crowdagg_commands(path):
            for i, token in enumerate(argv):
                if token in ("-o", "--output") and i + 1 < len(argv):
                    assert "truth" not in Path(argv[i + 1]).name, f"{path.name}:{n}: -o {argv[i + 1]}"
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"> *truth\.\w+", text), f"{path.name} redirects output into a truth file"
    for source in (ROOT / "crowdagg").rglob("*.py"):  # the help texts and docstrings
        hit = re.search(r"(> *|-o +|--output +)truth\.\w+", source.read_text(encoding="utf-8"))
        assert hit is None, f"{source.relative_to(ROOT)}: {hit.group(0)}"


# --------------------------------------------------------------------------- links between the pages
def slugs(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^#{1,6} +(.*?) *#*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower().replace("`", "")).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_anchor_links_resolve():
    pages = {README: slugs(README.read_text(encoding="utf-8")), BENCH_README: slugs(BENCH_README.read_text(encoding="utf-8"))}
    bad = []
    for path in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", path.read_text(encoding="utf-8")):
            page = path if not target else (path.parent / target).resolve()
            if page in pages and anchor not in pages[page]:
                bad.append(f"{path.relative_to(ROOT)}: {target}#{anchor}")
    assert not bad, "links to headings that do not exist:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- regenerate
def write_readme() -> bool:
    """Rewrite README.md's Dask methods list from the registry; True when it changed."""
    text = README.read_text(encoding="utf-8")
    start, end = _block_span(text)
    new = text[:start] + dask_methods_text() + text[end:]
    if new != text:
        README.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_readme.py --write   (rewrites README.md's Dask methods list)")
    sys.path.insert(0, str(ROOT))
    print("README.md: Dask methods list " + ("rewritten" if write_readme() else "already up to date"))
