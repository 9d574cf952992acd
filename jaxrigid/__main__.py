"""`python -m jaxrigid`: the `jaxrigid` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
