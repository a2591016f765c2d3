"""``crowdagg methods``: the registered methods, from their declarations (no method code is imported)."""

from __future__ import annotations

from typing import Any, Optional

import typer

from . import options as opt
from .options import PARAM_FLAGS, flag, require_values
from .plumbing import handle_errors, write_stdout


@handle_errors()
def methods(
    name: Optional[str] = typer.Argument(None, metavar="[NAME]", help="A method: show its model, reference and parameters."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: aligned text)."),
    verbose: bool = opt.VERBOSE,
) -> None:
    """List the methods, one line each -- the aggregators, then the trainers (``crowdagg train``); with NAME, one
    method in full (kind, engines, parameters)."""
    from ..errors import CrowdaggWarning, warn
    from ..methods.registry import METHODS, TRAINERS

    require_values(format=fmt)
    out_fmt = None
    if fmt is not None:
        from ..io.output import check_binary, resolve
        from ..io.read import output_format

        out_fmt = output_format(fmt, None)
        check_binary(resolve("-"), out_fmt)
    if name is not None:
        spec = find(name)
        if fmt is None:
            write_stdout(method_text(spec))
            return
        rows: dict[str, list[Any]] = {k: [] for k in ("parameter", "type", "default", "range", "paper", "help")}
        for p in spec.params:
            for key, value in zip(rows, (p.name, p.kind_name, p.describe_default(), p.describe_range(), p.paper,
                                         p.help)):
                rows[key].append(value)
        table: dict[str, Any] = rows
    else:
        for registry in (METHODS, TRAINERS):  # the others are listed: say what is missing and why
            for family, reason in registry.failures().items():
                warn(CrowdaggWarning(f"{family} failed to declare its methods, which are not listed: {reason}"))
        specs = [*METHODS.values(), *TRAINERS.values()]
        if fmt is None:
            width = max(len(m.name) for m in specs)
            write_stdout("".join(f"{m.name:<{width}}  {m.summary}{_unavailable(m)}\n" for m in specs))
            return
        table = {
            "method": [m.name for m in specs],
            "class": [m.target.partition(":")[2] for m in specs],
            "summary": [m.summary for m in specs],
            "kind": [m.kind for m in specs],
            "engines": [",".join(m.engines) for m in specs],
            "gold": [m.gold for m in specs],
            "saved_models": [m.init_workers for m in specs],
            "requires": [m.requires for m in specs],
        }
    import numpy as np

    from ..io.render import render_table

    assert out_fmt is not None
    # a column of Python bools as numpy bools: true/false in every format (an object column would say "True");
    # a method may declare no parameters: its table has the columns and no row
    columns = {k: np.array(v, dtype=bool if v and isinstance(v[0], bool) else object) for k, v in table.items()}
    write_stdout(render_table(columns, out_fmt))


def find(name: str) -> Any:
    """The declaration of an aggregator or a trainer named ``name`` (an unknown name: a usage error listing both)."""
    from ..methods.registry import METHODS, TRAINERS, UnknownMethod

    for registry in (METHODS, TRAINERS):
        if name in registry:
            return registry[name]
    failed = "".join(f"; {family} failed to declare its methods ({reason})"
                     for registry in (METHODS, TRAINERS) for family, reason in registry.failures().items())
    raise UnknownMethod(f"unknown method {name!r}; aggregation methods: {', '.join(METHODS)}; trainers: "
                        f"{', '.join(TRAINERS)}{failed}")


def _unavailable(spec: Any) -> str:
    """`` [needs: pip install 'crowdagg[train]']`` for a method whose optional extra is missing (found, not imported)."""
    return f" [needs: pip install 'crowdagg[{spec.requires}]']" if spec.missing() else ""


def method_text(spec: Any) -> str:
    """``crowdagg methods NAME``: summary; kind, engines, gold, saved models, extra; model, reference, parameters."""
    import textwrap

    from ..methods.registry import KINDS

    lines = [f"{spec.name} -- {spec.summary}", "", f"Kind: {KINDS[spec.kind]}", f"Engines: {', '.join(spec.engines)}"]
    lines.append("Gold: --gold FILE, known labels that clamp those tasks" if spec.gold else "Gold: no")
    lines.append("Saved worker models: --save-workers FILE, --init-workers FILE" if spec.init_workers
                 else "Saved worker models: no")
    if spec.requires:
        missing = spec.missing()
        state = f"{', '.join(missing)} not installed" if missing else "installed"
        lines.append(f"Requires: the optional extra {spec.requires!r} (pip install 'crowdagg[{spec.requires}]'; {state})")
    lines.append("")
    lines += textwrap.wrap("Model: " + spec.model, 88, subsequent_indent="  ") + [""]
    lines += textwrap.wrap("Reference: " + spec.reference, 88, subsequent_indent="  ")
    lines += ["", "Parameters:" if spec.params else "Parameters: none"]
    for p in spec.params:
        how = _how(spec, p.name)
        bounds = p.describe_range()
        head = f"  {p.name} ({p.kind_name}, default {p.describe_default()}{', ' + bounds if bounds else ''}; {how})"
        paper = f" [paper: {p.paper}]" if p.paper else ""
        lines.append(head)
        lines += textwrap.wrap(p.help + paper, 84, initial_indent="      ", subsequent_indent="      ")
    if spec.kind == "trainer":
        lines += ["", "Module groups (each its own Adam parameter group):",
                  "  network (lr, weight decay --weight-decay): the classifier"]
        for g in spec.groups:
            lines += textwrap.wrap(g.describe(), 88, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines) + "\n"


def _how(spec: Any, name: str) -> str:
    """How a parameter is set on the method's command: its flag, or ``-p name=VALUE``."""
    if spec.kind == "trainer":
        from .train import TRAIN_FLAGS

        return "--" + name.replace("_", "-") if name in TRAIN_FLAGS else f"-p {name}=VALUE"
    return flag(name) if name in PARAM_FLAGS else f"-p {name}=VALUE"
