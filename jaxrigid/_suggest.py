"""'Did you mean …' for an unknown name: the nearest valid names, for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_SUGGESTIONS = 3
CUTOFF = 0.6  # difflib's default similarity ratio: below it a name is not offered


def _key(name: str) -> str:
    """What names are compared by: lower case, leading dashes dropped (`--seed` is no nearer
    to `--ensembel` for the dashes they share)."""
    return name.lower().lstrip("-")


def close_names(name: str, valid: Iterable[str]) -> list[str]:
    """Up to `MAX_SUGGESTIONS` names of `valid` nearest to `name` (case-insensitively, by
    `difflib.get_close_matches`), nearest first and equally near ones in `valid`'s order;
    empty when none is close."""
    by_key: dict[str, str] = {}
    for v in valid:
        by_key.setdefault(_key(v), v)
    key = _key(name)
    close = difflib.get_close_matches(key, by_key, max(1, len(by_key)), CUTOFF)  # all close ones
    order = {k: i for i, k in enumerate(by_key)}
    ratio = lambda k: difflib.SequenceMatcher(None, key, k).ratio()
    nearest = sorted(close, key=lambda k: (-ratio(k), order[k]))[:MAX_SUGGESTIONS]
    return [by_key[k] for k in nearest]


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """The suffix an unknown-name message ends with: `"; did you mean 'IMIDM' or 'IMID'?"`,
    or `""` when no valid name is close to `name`."""
    names = [repr(n) for n in close_names(name, valid)]
    if not names:
        return ""
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"; did you mean {listed}?"
