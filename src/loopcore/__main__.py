"""``python -m loopcore``: the same command line as the ``loopcore`` console script."""

import sys

from .cli import main

sys.exit(main())
