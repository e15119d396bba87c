"""The controller's service shell: it follows the cluster, hands events to the pure rules
(``lahar_controller.job``, ``queues``, ``podgroups``, ``ttl``, ``cron``) and performs what they
return through the Kubernetes API.  Everything with I/O or a clock lives here."""
