"""The selection family: what the data-selection stage cost in the study's terms (``cost.py``)."""
