"""How the `jaxrigid` command reports problems: the two error kinds and warnings."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


class RunError(Exception):
    """A run that could not be completed (not bad input): one line on stderr, exit status 1."""


def warn(message: str) -> None:
    print(f"jaxrigid: warning: {message}", file=sys.stderr)
