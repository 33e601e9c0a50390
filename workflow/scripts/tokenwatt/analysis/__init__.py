"""The analysis of a finished study: the frame of trials, each measure's scale, the repeated-measures tests,
their APA text, the measurement-quality rules and the scaling-law fits. Reads trial records; never trains."""
