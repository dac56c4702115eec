"""``python -m daskelastic {demo,fit}``: the command line of :mod:`daskelastic.cli`."""

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
