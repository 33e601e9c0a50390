"""Power and energy meters, device control, throughput checks and the power trace's windows: what a device can
report, knowing nothing of the study."""
