"""bayesldp's benchmarks: ``python -m benchmarks list`` (see ``benchmarks/registry.py``)."""
