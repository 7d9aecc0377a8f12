"""Numerical mechanisms: real values in a bounded domain ``[lo, hi]``, estimated over bins.

One module per family: ``square_wave`` (SW, Li et al. SIGMOD 2020), ``piecewise`` (PM, Wang et
al. ICDE 2019), ``laplace`` (Laplace noise after normalisation) and ``gaussian`` ((eps,
delta)-LDP Gaussian noise, analytic calibration of Balle & Wang 2018); ``base`` holds the
protocol they share and ``discretise`` the binning and the exact bin integrals.  Every class is
a :class:`~bayesldp.mechanisms.base.FiniteChannelMechanism` whose ``k`` categories are the input
bins, so the estimators and posteriors of the package apply to its tallies unchanged.
"""
