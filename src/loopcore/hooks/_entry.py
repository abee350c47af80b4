"""The ``loopcore`` console script's entry: ``loopcore hook ...`` goes straight to the hook.

loopcore.cli imports argparse, logging and typing before it can look at its arguments; a hook runs
before every tool call, so ``loopcore hook claude`` (a hand-written hook command) skips that
module entirely. Every other command is loopcore.cli's, unchanged.
"""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        from . import main as hook_main

        return hook_main(sys.argv[2:])
    from ..cli import main as cli_main

    return cli_main()
