"""``python -m polytile``: the same command line as the ``polytile`` console script."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
