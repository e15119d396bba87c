"""``lahar access``: the credentials and server configuration of an authenticated deployment.

    lahar access secrets --namespace lahar-system --out secrets.yaml && kubectl create -f secrets.yaml
    lahar access nats-conf --prefix lahar        # the nats.conf of deploy/nats-config.yaml

Both come from the one access table (``lahar.wire.access``); ``lahar up`` makes its own per run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

NATS_DNS = ["lahar-nats", "lahar-nats.lahar-system.svc", "lahar-nats.lahar-system.svc.cluster.local"]


def register(sub: Any) -> None:
    p = sub.add_parser("access", help="credentials and server configuration for NATS and Valkey users")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    s = verbs.add_parser(
        "secrets",
        help="print new Secrets (YAML): every role's passwords, Valkey's ACL file, NATS's TLS pair",
        description="Prints three Secrets with new random passwords and a new CA; pipe them to "
        "`kubectl create -f -` (create, not apply: apply would keep the passwords in an annotation).",
    )
    s.add_argument("--namespace", default="lahar-system")
    s.add_argument("--prefix", default="lahar", help="the LAHAR_PREFIX of the services (it names the Valkey keys)")
    s.add_argument("--nats-dns", nargs="+", default=NATS_DNS, help="names the NATS certificate is valid for")
    s.add_argument("--days", type=int, default=365, help="validity of the NATS certificate")
    s.add_argument("--out", help="write them to this file (readable by you only) instead of standard output")
    s.set_defaults(handler=run_secrets)
    c = verbs.add_parser("nats-conf", help="print nats-server.conf: users and permissions, TLS")
    c.add_argument("--prefix", default="lahar")
    c.add_argument("--tls-dir", default="/etc/nats/tls", help="where tls.crt and tls.key are mounted")
    c.set_defaults(handler=run_nats_conf)


def run_secrets(args: argparse.Namespace) -> int:
    import yaml

    from lahar.infra.auth import Credentials, kubernetes_secrets
    from lahar.infra.certs import make_pair

    try:
        certs = make_pair(args.nats_dns, days=args.days, ca_name="lahar-nats-ca")
        secrets = kubernetes_secrets(args.prefix, Credentials(), certs, args.namespace)
    except ValueError as exc:
        print(f"lahar access secrets: {exc}", file=sys.stderr)
        return 2
    text = yaml.safe_dump_all(secrets, sort_keys=False)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
    except OSError as exc:
        print(f"lahar access secrets: {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {', '.join(s['metadata']['name'] for s in secrets)}", file=sys.stderr)
    return 0


def run_nats_conf(args: argparse.Namespace) -> int:
    from lahar.infra.auth import from_environment, nats_conf
    from lahar.wire.names import Names

    try:
        names = Names(args.prefix)
    except ValueError as exc:
        print(f"lahar access nats-conf: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(nats_conf(names, from_environment, tls=(f"{args.tls_dir}/tls.crt", f"{args.tls_dir}/tls.key")))
    return 0
