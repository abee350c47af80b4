"""``python -m loopcore.hooks``: the same as ``loopcore hook`` / ``loopcore-hook``."""

import sys

from . import main

sys.exit(main())
