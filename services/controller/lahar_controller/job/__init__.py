"""Volcano Jobs: pure rendering (``render``), plugins (``plugins``) and, next to them, the job
state machine.  No I/O: objects are plain dicts of Kubernetes JSON."""
