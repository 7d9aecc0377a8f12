"""``python -m bayesldp``: the ``bayesldp`` command line (:mod:`bayesldp.workflows.cli`)."""

from bayesldp.workflows.cli import main

raise SystemExit(main())
