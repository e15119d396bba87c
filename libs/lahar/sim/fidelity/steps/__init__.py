"""The steps of the fidelity sequence, one module per area (see ``sequence.py`` for their order)."""
