"""``python -m blooml``: the same as the ``blooml`` command."""

import sys

from blooml.cli import main

if __name__ == "__main__":
    sys.exit(main())
