"""``lahar chaos``: fault scenarios on the whole system, with the invariants checked throughout."""
