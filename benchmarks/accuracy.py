"""Accuracy study of the source papers' claims (Lopuhaä-Zwakenberg et al. 2020, Ye et al.,
Biswas et al. 2022): ``bayesldp.workflows.accuracy``.

Usage::

    python benchmarks/accuracy.py --out benchmarks/results/accuracy.md    # default sizes
    python benchmarks/accuracy.py --full --out results_full.md
    python benchmarks/accuracy.py --sections mle --repeats 5             # a quick look

The same study runs as ``bayesldp run models/accuracy.toml``.
"""

import sys
from pathlib import Path

from bayesldp.workflows.accuracy import main

if __name__ == "__main__":
    default = str(Path(__file__).resolve().parents[1] / "models" / "accuracy.toml")
    sys.exit(main(default_spec=default, command="python benchmarks/accuracy.py"))
