"""The scaling family: the loss law L(N, D) and its lack of fit (``law.py``, ``units.py``), joules per token against
model size (``energy_per_token.py``), the allocations they imply (``allocation.py``), the energy-optimal frontier by
three estimators (``frontier.py``), and the study's scaling product that turns trials into points (``study.py``)."""
