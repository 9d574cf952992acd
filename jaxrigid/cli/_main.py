"""The `jaxrigid` command's entry point: argument parsing, dispatch and exit statuses, and the
`cases` and `methods` subcommands."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import NoReturn

from .._collector import relaxed_collection
from .._suggest import did_you_mean
from .control import add_parser as add_control_parser
from .control import cmd_control
from .errors import RunError, UsageError
from .lookups import find_case
from .sweep import add_parser as add_sweep_parser
from .sweep import cmd_sweep

# ----------------------------------------------------------------------------------------
# Argument parsing

# argparse's message for a value outside `choices` (quotes around the choices vary between
# Python versions)
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" error names the nearest choices (argparse's
    own `suggest_on_error` exists from Python 3.14 only). Its subcommands' parsers are of
    this class too (`add_subparsers` makes them of the parser's class)."""

    def error(self, message: str) -> NoReturn:
        found = _INVALID_CHOICE.search(message)
        if found:
            choices = [c.strip(" '\"") for c in found["choices"].split(",")]
            message += did_you_mean(found["value"], choices)
        super().error(message)


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(
        prog="jaxrigid", description="Structure-preserving rigid-body integrators in JAX."
    )
    parser.add_argument("--version", action="version", version=f"jaxrigid {__version__}")
    parser.add_argument(
        "--no-compilation-cache",
        action="store_true",
        help="do not use the persistent compilation cache (default: on, in JAXRIGID_CACHE_DIR "
        "or $XDG_CACHE_HOME/jaxrigid/xla; JAXRIGID_NO_COMPILATION_CACHE=1 also turns it off)",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{cases,methods,run,control,sweep}"
    )

    p = sub.add_parser("cases", help="list the built-in cases, or show one")
    p.add_argument("case", nargs="?", help="a case name: show its description and parameters")

    sub.add_parser("methods", help="list the integrators and the cases they apply to")

    p = sub.add_parser("run", help="integrate a case and write its trajectory, table and plot")
    p.add_argument("case", help="case name (see `jaxrigid cases`)")
    p.add_argument("--method", help="integrator (default: the case's default method)")
    p.add_argument("--dt", type=float, help="step size (default: the case's)")
    p.add_argument("--t-end", type=float, help="final time (default: the case's)")
    p.add_argument("--ensemble", type=int, help="integrate N perturbed copies (member 0 exact)")
    p.add_argument("--seed", type=int, default=0, help="seed of the ensemble perturbation")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a parameter of the case (repeatable)",
    )
    p.add_argument("--out", default="jaxrigid-out", help="output directory")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_control_parser(sub)
    add_sweep_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `jaxrigid` command. Returns the exit status."""
    parser = _parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:  # what `parse_args` says, with the nearest option where one is close
            message = f"unrecognized arguments: {' '.join(extras)}"
            parser.error(message + _option_hint(parser, args.command, argv, extras))
    except SystemExit as exit_:  # argparse's own errors (status 2), --help and --version
        return exit_.code if isinstance(exit_.code, int) else 2

    import jax

    jax.config.update("jax_enable_x64", True)
    if not args.no_compilation_cache:
        from ..compilation_cache import enable_compilation_cache

        enable_compilation_cache()
    commands = {"cases": cmd_cases, "methods": cmd_methods, "run": _cmd_run}
    commands["control"] = cmd_control
    commands["sweep"] = cmd_sweep
    try:
        # a command mostly builds programs, some outside the library's own builds: Python's
        # collector made rare for all of it (`_collector`)
        with relaxed_collection():
            return commands[args.command](args)
    except UsageError as err:
        _error_line(err)
        return 2
    except RunError as err:
        _error_line(err)
        return 1
    except BrokenPipeError:  # `jaxrigid run ... | head`: the reader left; not an error
        # Python's documented recipe: point stdout at devnull so the exit flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _option_hint(parser, command: str, argv: list[str] | None, extras: list[str]) -> str:
    """`did_you_mean` for the first unrecognized option among `extras`: against the options of
    `command` when it was given after the command's name, else the top-level parser's."""
    option = next((e for e in extras if e.startswith("-")), None)
    if option is None:
        return ""
    argv = sys.argv[1:] if argv is None else list(argv)
    where = parser
    if command in argv and option in argv and argv.index(option) > argv.index(command):
        where = _subparsers(parser).get(command, parser)
    return did_you_mean(option.partition("=")[0], _option_strings(where))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name."""
    for action in getattr(parser, "_actions", []):  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string `parser` takes (`--method`, `-h`, ...), in the order declared."""
    return [s for action in getattr(parser, "_actions", []) for s in action.option_strings]


def _cmd_run(args) -> int:
    from .run import cmd_run  # the setup and output of a run: not imported to list things

    return cmd_run(args)


def _error_line(err: Exception) -> None:
    message = " ".join(str(err).split())
    print(f"jaxrigid: error: {message}", file=sys.stderr)


# ----------------------------------------------------------------------------------------
# `jaxrigid cases`, `jaxrigid methods`


def cmd_cases(args) -> int:
    """List the cases, or describe one."""
    from ..cases import CASES

    if args.case is None:
        width = max(map(len, CASES))
        for name, case in CASES.items():
            print(f"{name:<{width}}  {case.title}")
        return 0
    case = find_case(args.case)
    n_steps = max(1, round(case.default_t_end / case.default_dt))
    print(f"{case.name}: {case.title}")
    print()
    print(case.description)
    print()
    print(f"reference:       {case.reference}")
    print(f"family:          {case.family} (see `jaxrigid methods`)")
    print(f"default method:  {case.default_method}")
    print(f"dt:              {case.default_dt:g}")
    print(f"t_end:           {case.default_t_end:g} ({n_steps} steps)")
    print(f"ensemble spread: {case.ensemble_spread:g}")
    print()
    print("parameters (override with --set NAME=VALUE):")
    width = max(map(len, case.parameters))
    for name, param in case.parameters.items():
        print(f"  {name:<{width}}  {param.default:<10g}  {param.doc}")
    return 0


def cmd_methods(args) -> int:
    """List the integrators of each family and the cases they apply to: the cases with a model
    of the family's structures that they integrate (asked of the stand-ins the cases' forms
    state: no model is built). A method of two families (Gauss6: canonical systems and
    chains) is listed in each with that family's cases."""
    from ..cases import CASES
    from ..integrators import METHODS_BY_FAMILY, family_structures

    for family, methods in METHODS_BY_FAMILY.items():
        integrators = [factory() for factory in methods.values()]
        structures = family_structures(family)
        applies = [
            [n for n, case in CASES.items() if case.accepts(i, structures)] for i in integrators
        ]
        cases = [n for n in CASES if any(n in names for names in applies)]
        print(f"{family} methods (apply to: {', '.join(cases) or 'no built-in case'}):")
        # what each keeps on this family's models (DMV keeps no energy on coupled bodies)
        models = [m for n in cases for m in CASES[n].sketches() if isinstance(m, structures)]
        rows = [_method_row(name, i, models) for name, i in zip(methods, integrators)]
        for row, names in zip(rows, applies):
            if names != cases:
                row[4] += f" [only: {', '.join(names) or 'no built-in case'}]"
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            cells = [cell.ljust(w) for cell, w in zip(row, widths)]
            print("  " + "  ".join(cells + [row[4]]))
    from ..integrators import COMPOSITION_SCHEMES

    print("composition schemes (--method <symmetric method>:<scheme>, e.g. IMIDM:kahan-li8):")
    for scheme in COMPOSITION_SCHEMES.values():
        facts = f"order {scheme.order:<3} {scheme.stages:>2} stages"
        print(f"  {scheme.name:<22} {facts}  {scheme.reference}")
    return 0


def _method_row(name: str, integrator, models=()) -> list[str]:
    """The listing's row; `keeps`: what it keeps on every one of `models` it integrates
    (`preserved`), its `preserves` where it integrates none."""
    implicit = integrator.implicit
    kind = "implicit" if implicit else "explicit"
    kept = [integrator.preserved(m) for m in models if integrator.integrates(m)]
    keeps = ",".join(sorted(frozenset.intersection(*kept) if kept else integrator.preserves))
    keeps = keeps or "-"
    return [name, f"order {integrator.order}", kind, f"keeps {keeps}", integrator.reference]
