"""Exceptions raised by bayesldp.

Every error caused by a caller's input is a subclass of :class:`BayesLDPError` *and* of the
matching builtin (``ValueError`` or ``TypeError``), so ``except ValueError`` keeps working.
Messages name the argument, the value received and what would be valid.
"""

from __future__ import annotations


class BayesLDPError(Exception):
    """Base class of every error raised by bayesldp.

    Examples
    --------
    Every error bayesldp raises on purpose is one, so one ``except`` catches them all:

    >>> import bayesldp
    >>> try:
    ...     bayesldp.GRR(1, 1.0)
    ... except bayesldp.BayesLDPError as exc:
    ...     print(type(exc).__name__, "-", exc)
    InvalidInputError - k: the domain needs at least 2 categories, got 1
    """


class InvalidInputError(BayesLDPError, ValueError):
    """An argument has the right type but a value outside what is valid.

    Examples
    --------
    A value out of range; it is also a ``ValueError``:

    >>> import bayesldp
    >>> bayesldp.GRR(5, -1.0)
    Traceback (most recent call last):
        ...
    bayesldp.errors.InvalidInputError: ...
    >>> issubclass(bayesldp.InvalidInputError, ValueError)
    True
    """


class InvalidTypeError(BayesLDPError, TypeError):
    """An argument has a type bayesldp cannot use.

    Examples
    --------
    A value of a type bayesldp cannot use; it is also a ``TypeError``:

    >>> import bayesldp
    >>> bayesldp.GRR("five", 1.0)
    Traceback (most recent call last):
        ...
    bayesldp.errors.InvalidTypeError: k: expected an integer number of categories, got 'five'
    >>> issubclass(bayesldp.InvalidTypeError, TypeError)
    True
    """


class IncompatibleTallyError(InvalidInputError):
    """Two tallies that come from different mechanisms (or domains) were combined.

    Examples
    --------
    Tallies of different mechanisms cannot be added:

    >>> import bayesldp
    >>> grr, oue = bayesldp.GRR(3, 1.0), bayesldp.OUE(3, 1.0)
    >>> a = grr.tally(grr.perturb([0, 1, 2], rng=0))
    >>> b = oue.tally(oue.perturb([0, 1, 2], rng=0))
    >>> a + b  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    bayesldp.errors.IncompatibleTallyError: cannot merge tallies of different mechanisms: ...
    """


class NotSupportedError(BayesLDPError, NotImplementedError):
    """The operation is well defined in general but not available for this mechanism.

    Examples
    --------
    The smoothness prior has no exact posterior; it is also a ``NotImplementedError``:

    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 0], rng=0))
    >>> bayesldp.fit(tally, prior=bayesldp.SmoothDensity(3), method="exact")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    bayesldp.errors.NotSupportedError: prior: the SmoothDensity prior is not available ...'exact'...
    """


class PointwiseSizeError(InvalidInputError):
    """A per-report pointwise log-likelihood was refused as too large for memory; the message
    names the exact route that needs none (:func:`bayesldp.loo`).

    ``str()`` is the first line of the message only: an error raised inside a compiled PyTensor
    function gets a dump of the graph node appended by PyTensor, kept in ``args`` for
    debugging but not shown.
    """

    def __str__(self) -> str:
        text = super().__str__()
        return text.split("\n", 1)[0]


class ConvergenceWarning(UserWarning):
    """A posterior's diagnostics are poor (r_hat, effective sample size, divergences)."""


class LargeOutputWarning(UserWarning):
    """A requested output is large (hundreds of MB or more) while a cheaper route gives the same
    result, e.g. a per-report ``log_likelihood`` group where :func:`bayesldp.loo` needs none."""


class ClippingWarning(UserWarning):
    """Values outside a numerical mechanism's domain were clipped, as the caller asked."""


class StoppingWarning(UserWarning):
    """A survey's stopping target was not met within the users it was given."""


class PanelWarning(UserWarning):
    """Rounds that share users (a panel) were given to a model that assumes independent users
    per round (:func:`bayesldp.fit_rounds`): its intervals under-cover."""


class DamagedStoreError(InvalidInputError):
    """A durable store on disk (a tally store) is damaged: a file is missing, truncated or
    altered.  The message names the part, says whether an earlier generation is intact and how
    to roll back to it."""


class StoreWriteError(BayesLDPError, OSError):
    """A durable store could not be written (disk full, a file-size limit, permissions); the
    message says what was left as it was."""
