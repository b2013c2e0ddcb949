"""Process plumbing: atomic writes, sealed caches, the run directory, the lock, workers, watchdog."""
