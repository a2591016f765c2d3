"""Embedded example datasets.

``bluebird`` (Welinder et al. 2010, "The multidimensional wisdom of crowds";
welinder/cubam, BSD licence, see LICENSE-bluebird.txt): 108 bird images,
39 workers, 2 classes, every worker labels every image.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Embedded datasets usable as ``example:NAME`` wherever a file is expected.
EXAMPLES = ("bluebird",)


def path(name: str) -> Path:
    """Path of an embedded example file, e.g. ``path("bluebird_labels.csv")``."""
    p = HERE / name
    if not p.exists():
        raise FileNotFoundError(f"no embedded example {name!r}")
    return p
