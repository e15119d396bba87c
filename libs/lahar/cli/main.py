"""The ``lahar`` command.  Each module of this package that defines ``register(subparsers)``
adds its subcommands, so new commands need no edit here."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import pkgutil
import sys
from collections.abc import Sequence

import lahar.cli
from lahar.cli.services import SERVICES, run_service_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lahar", description="Lahar: a Volcano-compatible batch scheduler.")
    parser.add_argument("--version", action="version", version=f"lahar {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(lahar.cli.__path__), key=lambda m: m.name):
        if info.name in ("main", "__main__") or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"lahar.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in SERVICES:
        # Services parse their own flags (and LAHAR_* variables) with the service runtime.
        sys.exit(run_service_command(args_list[0], args_list[1:]))
    parser = build_parser()
    args = parser.parse_args(args_list)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        sys.exit(2)
    try:
        code = handler(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`lahar get pods | head`): like kubectl, stop quietly.  Point stdout
        # at /dev/null so the interpreter's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)  # 128 + SIGPIPE, what a shell shows for a command ended by a closed pipe
    sys.exit(int(code or 0))


def _version() -> str:
    try:
        return importlib.metadata.version("lahar")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


if __name__ == "__main__":
    main()
