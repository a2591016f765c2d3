"""What is computed from results and answers for people to read: evaluation against the truth (:mod:`.evaluate`), the annotator report (:mod:`.workers`), agreement statistics (:mod:`.agreement`)."""

from __future__ import annotations

from typing import Any


def terminal_text(value: str) -> Any:
    """``value`` as a rich ``Text`` cell for a terminal table: drawn as it is spelt, not read as rich markup (a
    worker or class named ``[/b]`` failed the table), and its control characters shown escaped (``\\x1b``, ``\\t``)
    rather than sent to the terminal (a worker id holding an escape sequence recoloured or retitled it)."""
    from rich.text import Text

    return Text("".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in value))


__all__ = ["terminal_text"]
