"""The notebooks' runner, :mod:`notebooks.execute`: a package so that the tests and
``benchmarks/notebooks.py`` import the same code that ``python notebooks/execute.py`` runs."""
