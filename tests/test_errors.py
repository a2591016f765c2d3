"""Messages worded for whoever called: keywords for the library, flags for the CLI."""

from __future__ import annotations

import warnings

from crowdagg.errors import CrowdaggWarning, UsageError, param, render


def test_parameter_references_render_per_audience():
    exc = UsageError(f"{param('max_iter')} must be >= 1; raise {param('max_iter')} or loosen {param('tol')}")
    assert str(exc) == "max_iter must be >= 1; raise max_iter or loosen tol"
    flags = exc.render(lambda n: "--" + n.replace("_", "-"))
    assert flags == "--max-iter must be >= 1; raise --max-iter or loosen --tol"
    assert exc.render({"tol": "--tolerance"}) == "max_iter must be >= 1; raise max_iter or loosen --tolerance"
    assert render("plain text") == "plain text"


def test_warnings_read_as_library_text():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(CrowdaggWarning(f"set {param('duplicates')} to first"), stacklevel=1)
    assert str(caught[0].message) == "set duplicates to first"
