"""The study as data: the validated config, the design's cells and paths, run order, the plan's preview, Hub checks."""
