"""The analysis of a finished study. At this level what every product reads: the frame of trials, the aggregate's
per-trial table, each measure's scale, the efficiency metrics, the measurement-quality rules, the repeated-measures
tests and their APA text, and the products' registry (``products.py``); below it, one package per product family:
``curves``, ``scaling``, ``selection``. Reads trial records; never trains."""
