"""What every stage shares: checked file I/O, typed records, the result store, code digests, provenance, the
measures' labels and how numbers are written."""
