"""Per-report pointwise log-likelihood of a PyMC tally model, at the cost of a per-row sum.

A tally keeps distinct likelihood rows ``L_u`` with counts ``c_u``; the observations are the
``N = sum_u c_u`` reports.  :func:`pymc.compute_log_likelihood` (and ``pm.sample(...,
idata_kwargs={"log_likelihood": True})``) stores the *element-wise* log-probability of each
observed variable, which ``arviz.loo`` then treats as one value per observation.  The observed
variable of :func:`bayesldp.bayes.model.tally_likelihood` therefore returns, element-wise, one
value per report,

.. math::

    \\ell_j(\\theta) = \\log(L_{u(j)} \\cdot \\theta), \\qquad j = 1, \\dots, N,

``u(j)`` the row of report ``j`` (``repeat(log(L theta), c)``, :class:`PerReport`), while its
sum, which is all that sampling evaluates, is rewritten to the per-row form

.. math::

    \\sum_j \\ell_j(\\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta),

with a gradient ``c_u / (L_u . theta)`` per row: ``O(U K)`` per log-density and gradient, as
before, never ``O(N)``.  Two pieces do this: a PyTensor graph rewrite (registered in the
"canonicalize" database, which the default C mode, FAST_COMPILE and Numba (nutpie) apply,
checked, as does the JAX mode of numpyro, not checked here) that turns ``sum(repeat(x, c))``
into ``sum(c * x)``, and the gradient of :class:`PerReport`, which for a broadcast scalar output
gradient (what the gradient of a sum is) is ``g * c`` directly.  The element-wise values
themselves run in Python (``numpy.repeat``; Numba runs them in object mode, with PyTensor's
warning; there is no JAX implementation, so numpyro's own log-likelihood step cannot compute
them: call :func:`pymc.compute_log_likelihood` on its output).

The per-report values of ``S`` draws take ``S * N * 8`` bytes (3.2 GB for ``N = 1e5`` at
PyMC's default 4 chains x 1000 draws, and ``arviz.loo`` / ``arviz.compare`` need several times
that); beyond ``POINTWISE_MAX_REPORTS`` reports the element-wise values are refused with one
line naming :func:`bayesldp.loo`, which computes the same PSIS-LOO from the posterior draws and
the tally alone, exactly, at any ``N``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.scalar.basic import Second
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.math import Sum
from pytensor.tensor.rewriting.basic import register_canonicalize

from bayesldp.errors import PointwiseSizeError

__all__ = ["POINTWISE_MAX_REPORTS", "PerReport", "ReportSum", "per_report"]

#: PyMC's default draws (4 chains x 1000) whose per-report log-likelihood is 500 MB
_DEFAULT_DRAWS = 4 * 1000
#: reports up to which the element-wise (pointwise) log-likelihood is given per report:
#: 500 MB of float64 at PyMC's default 4 chains x 1000 draws; beyond, it is refused
POINTWISE_MAX_REPORTS = 500_000_000 // (8 * _DEFAULT_DRAWS)


def _as_counts(counts: Any) -> Any:
    counts = pt.as_tensor_variable(counts)
    if counts.type.ndim != 1:
        raise TypeError(f"counts: expected a vector, got {counts.type}")
    return counts if counts.type.dtype == "int64" else pt.cast(counts, "int64")


class PerReport(Op):
    """``repeat(values, counts)``: one value per report from one value per row, (U,) -> (N,).

    ``max_reports``: above this many reports :meth:`perform` raises
    :class:`~bayesldp.errors.PointwiseSizeError` (one line naming :func:`bayesldp.loo`);
    ``name`` is the observed variable's name, for that message.  Sums of it are rewritten to
    ``sum(counts * values)`` (:func:`_local_sum_of_per_report`), so it is evaluated only for
    element-wise log-likelihoods.
    """

    __props__ = ("max_reports", "name")

    def __init__(self, max_reports: int, name: str = "counts") -> None:
        self.max_reports = int(max_reports)
        self.name = str(name)

    def make_node(self, values: Any, counts: Any) -> Apply:
        values = pt.as_tensor_variable(values)
        counts = _as_counts(counts)
        if values.type.ndim != 1:
            raise TypeError(f"values: expected a vector, got {values.type}")
        out = pt.TensorType(values.type.dtype, shape=(None,))()
        return Apply(self, [values, counts], [out])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        values, counts = inputs
        n = int(counts.sum())
        if n > self.max_reports:
            size = n * 8.0 * _DEFAULT_DRAWS
            raise PointwiseSizeError(
                f"{self.name}: the per-report pointwise log-likelihood of {n:,} reports is "
                f"refused (more than {self.max_reports:,}; {size / 1e9:,.3g} GB at PyMC's "
                "default 4 x 1000 draws); bayesldp.loo(idata, model=model) gives the same "
                "PSIS-LOO exactly without it"
            )
        output_storage[0][0] = np.repeat(values, counts)

    def infer_shape(self, fgraph: Any, node: Apply, input_shapes: Any) -> list[tuple[Any]]:
        return [(pt.sum(node.inputs[1]),)]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False]]

    def L_op(self, inputs: Any, outputs: Any, output_grads: Any) -> list[Any]:
        values, counts = inputs
        (grad,) = output_grads
        scalar = _broadcast_scalar(grad)
        if scalar is not None:  # the gradient of a sum: every report's gradient is `scalar`
            row_grad = scalar * counts
        else:
            row_grad = ReportSum()(grad, counts)
        return [pt.cast(row_grad, values.type.dtype), disconnected_type()]


class ReportSum(Op):
    """The per-row sums of per-report values, (N,) -> (U,): the adjoint of :class:`PerReport`."""

    __props__ = ()

    def make_node(self, values: Any, counts: Any) -> Apply:
        values = pt.as_tensor_variable(values)
        counts = _as_counts(counts)
        out = pt.TensorType(values.type.dtype, shape=(counts.type.shape[0],))()
        return Apply(self, [values, counts], [out])

    def perform(self, node: Apply, inputs: Any, output_storage: Any) -> None:
        values, counts = inputs
        row = np.repeat(np.arange(counts.shape[0]), counts)
        sums = np.bincount(row, weights=values, minlength=counts.shape[0])
        output_storage[0][0] = sums.astype(node.outputs[0].type.dtype)

    def infer_shape(self, fgraph: Any, node: Apply, input_shapes: Any) -> list[Any]:
        return [input_shapes[1]]

    def connection_pattern(self, node: Apply) -> list[list[bool]]:
        return [[True], [False]]

    def L_op(self, inputs: Any, outputs: Any, output_grads: Any) -> list[Any]:
        _, counts = inputs
        return [PerReport(np.iinfo(np.int64).max)(output_grads[0], counts), disconnected_type()]


def _broadcast_scalar(grad: Any) -> Any:
    """``g`` when ``grad`` is ``second(x, g[None])`` (how PyTensor writes the gradient of a
    sum: the scalar ``g`` filled to the shape of ``x``), else None."""
    owner = grad.owner
    if owner is None or not isinstance(owner.op, Elemwise):
        return None
    if not isinstance(owner.op.scalar_op, Second):
        return None
    filled = owner.inputs[1]
    if filled.type.ndim != 1 or filled.type.broadcastable != (True,):
        return None
    if filled.owner is not None and isinstance(filled.owner.op, DimShuffle):
        inner = filled.owner.inputs[0]
        if inner.type.ndim == 0:
            return inner
    return filled[0]


@register_canonicalize("fast_compile", name="bayesldp_sum_of_per_report")
@node_rewriter([Sum])
def _local_sum_of_per_report(fgraph: Any, node: Apply) -> list[Any] | None:
    """``sum(PerReport(values, counts)) -> sum(counts * values)``: the per-row log-likelihood."""
    (x,) = node.inputs
    if x.owner is None or not isinstance(x.owner.op, PerReport):
        return None
    values, counts = x.owner.inputs
    out = pt.sum(counts * values, dtype=node.outputs[0].type.dtype)
    return [out]


def per_report(values: Any, counts: Any, *, name: str = "counts") -> Any:
    """``repeat(values, counts)`` as a :class:`PerReport` node (refused beyond
    ``POINTWISE_MAX_REPORTS`` reports when evaluated; sums of it never evaluate it)."""
    return PerReport(POINTWISE_MAX_REPORTS, name)(values, counts)
