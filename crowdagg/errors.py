"""Exceptions raised by crowdagg.

The CLI turns :class:`DataError` into exit status 1 and :class:`UsageError`
into exit status 2, printing the message as one ``Error: ...`` line.
"""

from __future__ import annotations


class CrowdaggError(Exception):
    """Base class of every error crowdagg raises on purpose."""

    exit_code = 1


class DataError(CrowdaggError, ValueError):
    """The input data are malformed or unusable (exit status 1)."""

    exit_code = 1


class UsageError(CrowdaggError, ValueError):
    """An option or argument is invalid (exit status 2)."""

    exit_code = 2


class CrowdaggWarning(UserWarning):
    """Warnings about the data or the fit (duplicates, non-convergence, ...)."""


class ConvergenceWarning(CrowdaggWarning):
    """An iterative method stopped at ``max_iter`` before meeting ``tol``."""
