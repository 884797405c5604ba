"""``python -m explore.cli``: the same entry point as the ``lightpath`` command."""
import sys

from explore.cli.main import main

sys.exit(main())
