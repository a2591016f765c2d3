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
    """List the aggregation methods, one line each; with NAME, one method in full."""
    from ..methods.registry import METHODS, get

    require_values(format=fmt)
    out_fmt = None
    if fmt is not None:
        from ..io.output import check_binary, resolve
        from ..io.read import output_format

        out_fmt = output_format(fmt, None)
        check_binary(resolve("-"), out_fmt)
    if name is not None:
        spec = get(name)
        if fmt is None:
            write_stdout(method_text(spec))
            return
        rows: dict[str, list[Any]] = {k: [] for k in ("parameter", "type", "default", "range", "paper", "help")}
        for p in spec.params:
            for key, value in zip(rows, (p.name, p.kind.__name__, repr(p.default), p.describe_range(), p.paper, p.help)):
                rows[key].append(value)
        table: dict[str, Any] = rows
    else:
        if fmt is None:
            width = max(len(n) for n in METHODS)
            write_stdout("".join(f"{n:<{width}}  {m.summary}\n" for n, m in METHODS.items()))
            return
        table = {
            "method": list(METHODS),
            "class": [m.target.partition(":")[2] for m in METHODS.values()],
            "summary": [m.summary for m in METHODS.values()],
        }
    import numpy as np

    from ..io.render import render_table

    assert out_fmt is not None
    write_stdout(render_table({k: np.array(v, dtype=object) for k, v in table.items()}, out_fmt))


def method_text(spec: Any) -> str:
    """``crowdagg methods NAME``: summary, model, reference, parameters."""
    import textwrap

    lines = [f"{spec.name} -- {spec.summary}", ""]
    lines += textwrap.wrap("Model: " + spec.model, 88, subsequent_indent="  ") + [""]
    lines += textwrap.wrap("Reference: " + spec.reference, 88, subsequent_indent="  ") + ["", "Parameters:"]
    for p in spec.params:
        how = flag(p.name) if p.name in PARAM_FLAGS else f"-p {p.name}=VALUE"
        bounds = p.describe_range()
        head = f"  {p.name} ({p.kind.__name__}, default {p.default!r}{', ' + bounds if bounds else ''}; {how})"
        paper = f" [paper: {p.paper}]" if p.paper else ""
        lines.append(head)
        lines += textwrap.wrap(p.help + paper, 84, initial_indent="      ", subsequent_indent="      ")
    if spec.gold:
        lines += ["", "Takes --gold FILE: known labels that clamp those tasks."]
    return "\n".join(lines) + "\n"
