"""The sweeps beat runs beside the page groups: the reconciler (lost messages, expired
leases), recovery at start-up, retention of old jobs, and orphaned objects."""
