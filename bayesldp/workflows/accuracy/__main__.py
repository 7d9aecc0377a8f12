"""``python -m bayesldp.workflows.accuracy``: the accuracy study's command line (:func:`main`)."""

import sys

from bayesldp.workflows.accuracy import main

if __name__ == "__main__":
    sys.exit(main())
