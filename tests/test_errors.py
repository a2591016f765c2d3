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


def test_an_interrupt_wrapped_by_set_name_is_found_through_the_cause():
    """Python 3.11 wraps what ``__set_name__`` raises (a signal landing while pydantic is imported) in a
    RuntimeError; the run was interrupted, and :func:`interruption` says so."""
    from crowdagg.errors import Interrupted, interruption

    class Trips:
        def __set_name__(self, owner, name):
            raise Interrupted(2, "SIGINT")

    try:
        type("Victim", (), {"field": Trips()})
    except Exception as exc:  # noqa: BLE001 - the wrapper's type is the interpreter's
        found = interruption(exc)
    else:  # pragma: no cover - an interpreter that does not wrap it would have raised Interrupted itself
        raise AssertionError("no exception")
    assert isinstance(found, Interrupted) and found.exit_code == 130
    assert isinstance(interruption(RuntimeError("x")), type(None))
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise ValueError("cleanup failed") from inner
    except ValueError as outer:
        assert isinstance(interruption(outer), KeyboardInterrupt)
