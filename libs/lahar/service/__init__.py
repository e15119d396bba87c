"""The runtime every Lahar service shell shares: settings, logging, probes and metrics, graceful
shutdown, all wired together by ``run_service``.  See ``lahar.service.runtime`` for an example."""

from lahar.service.health import Health
from lahar.service.http import ProbeServer
from lahar.service.logs import configure_logging
from lahar.service.runtime import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, ServiceContext, run_service, serve
from lahar.service.settings import Check, Secret, Settings, SettingsError, load_settings, settings_parser
from lahar.service.shutdown import ShutdownSignals, finish_within

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Check",
    "Health",
    "ProbeServer",
    "Secret",
    "ServiceContext",
    "Settings",
    "SettingsError",
    "ShutdownSignals",
    "configure_logging",
    "finish_within",
    "load_settings",
    "run_service",
    "serve",
    "settings_parser",
]
