"""Outputs byte-identical to the writers before Arrow ingest.

``tests/golden/cli_outputs.json`` holds the SHA-256 of ``crowdagg aggregate
DATASET -m METHOD --proba -o out.EXT --workers w.EXT`` as written by commit
5bc0f43 (pandas readers, Python writers), for three real datasets, every
method and every text format.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from tests.tiers import quick_case

GOLDEN = json.loads((Path(__file__).parent.parent / "golden" / "cli_outputs.json").read_text())


@pytest.mark.parametrize("case", quick_case(sorted(GOLDEN), "bluebird/mv/csv", "mv"))
def test_outputs_are_byte_identical_to_the_pre_arrow_writers(case, datasets_dir, tmp_path):
    ds, method, ext = case.split("/")
    out, workers = tmp_path / f"o.{ext}", tmp_path / f"w.{ext}"
    result = CliRunner().invoke(app, ["aggregate", str(datasets_dir / ds / "labels.csv"), "-m", method, "--proba",
                                      "-o", str(out), "--workers", str(workers)])
    assert result.exit_code == 0, result.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == GOLDEN[case]["truth"]
    assert hashlib.sha256(workers.read_bytes()).hexdigest() == GOLDEN[case]["workers"]
