"""A run from start to end: the run, its estimate (--dry-run), scaling sweeps, data parallel ranks, guards."""
