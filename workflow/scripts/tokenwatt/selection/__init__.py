"""Data selection between normalization and tokenization: near-duplicate removal and quality filters."""
