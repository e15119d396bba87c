"""``lahar admission serve|certs|webhooks`` (and ``lahar bench admission``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("admission", help="the admission webhook service (Volcano's validating/mutating rules)")
    cmds = p.add_subparsers(dest="admission_command", metavar="SUBCOMMAND")
    _register_serve(cmds)
    certs = cmds.add_parser("certs", help="make a development CA and serving certificate")
    certs.add_argument(
        "--dns",
        nargs="+",
        required=True,
        metavar="NAME",
        help="DNS names (or IP addresses) the serving certificate is valid for",
    )
    certs.add_argument("--out", required=True, metavar="DIR", help="folder for ca.crt, tls.crt and tls.key")
    certs.add_argument("--days", type=int, default=365)
    certs.set_defaults(handler=run_certs)
    hooks = cmds.add_parser("webhooks", help="print the Validating/MutatingWebhookConfigurations as JSON")
    hooks.add_argument("--url", required=True, help="base URL of the service, e.g. https://127.0.0.1:8443")
    hooks.add_argument("--ca", required=True, help="the CA certificate (PEM file) that signed the serving cert")
    hooks.add_argument("--timeout-seconds", type=int, default=5)
    hooks.set_defaults(handler=run_webhooks)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


def register_bench(bench_sub: Any) -> None:
    """Hang the benchmark under a shared ``lahar bench`` as ``lahar bench admission``."""
    _bench_arguments(bench_sub.add_parser("admission", help="benchmark the admission service"))


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queues", type=int, default=1000, help="queues written to the mirror")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of each load phase")
    p.add_argument("--connections", type=int, default=32, help="concurrent connections of the load generator")
    p.add_argument("--rate", type=float, default=500.0, help="the fixed rate of the latency phase (reviews/s)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(handler=run_bench)


def _register_serve(cmds: Any) -> None:
    from lahar_admission.config import PARSERS, env_of, flag_of

    serve = cmds.add_parser(
        "serve",
        help="serve the webhooks over HTTPS",
        description="Every flag can also be set with its LAHAR_ADMISSION_* environment variable.",
    )
    helps = {
        "cert_file": "serving certificate (PEM); reloaded when it changes",
        "key_file": "serving key (PEM); reloaded when it changes",
        "on_unavailable": "allow|deny, or per kind: jobs=deny,queues=deny,podgroups=deny,pods=allow",
        "scheduler_names": "comma-separated; the first is the default Job schedulerName",
        "enabled_admission": "comma-separated webhook paths to serve (default: all)",
        "default_timeout": "answer within this when the request has no ?timeout= (e.g. 10s)",
    }
    for name in PARSERS:
        serve.add_argument(
            flag_of(name),
            dest=name,
            default=None,
            metavar="VALUE",
            help=f"{helps.get(name, '')} [{env_of(name)}]".strip(),
        )
    serve.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from lahar_admission.config import PARSERS, SettingsError, load_settings
    from lahar_admission.runner import serve

    try:
        settings = load_settings({name: getattr(args, name, None) for name in PARSERS})
    except SettingsError as exc:
        print(f"lahar admission serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))
    return 0


def run_certs(args: argparse.Namespace) -> int:
    from lahar_admission.tls import make_certs

    try:
        files = make_certs(args.dns, args.out, days=args.days)
    except (ValueError, OSError) as exc:
        print(f"lahar admission certs: {exc}", file=sys.stderr)
        return 2
    print(f"CA: {files.ca}\ncertificate: {files.cert}\nkey: {files.key}")
    return 0


def run_webhooks(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lahar_admission.webhooks import webhook_configurations

    try:
        ca = Path(args.ca).read_bytes()
        objs = webhook_configurations(args.url, ca, timeout_seconds=args.timeout_seconds)
    except (OSError, ValueError) as exc:
        print(f"lahar admission webhooks: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=2))
    return 0


def run_bench(args: argparse.Namespace) -> int:
    from lahar_admission.bench import BenchError, run

    try:
        result = run(queues=args.queues, duration=args.duration, connections=args.connections, rate=args.rate)
    except BenchError as exc:
        print(f"lahar bench admission: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0
