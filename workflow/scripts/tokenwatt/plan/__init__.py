"""The study as data: the validated config, the design's cells and paths, run order, the plan's preview, Hub checks,
and the config's own rules the later stages apply (model presets, stopping rules, cost)."""
