"""What every stage shares: checked file I/O, typed records, the result store, code digests, provenance."""
