"""What the command tests share: one Click runner per module (``invoke`` itself is :func:`tests.cli.test_cli.invoke`)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()
