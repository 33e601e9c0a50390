"""Power and energy meters, device control, throughput checks, traces and the measurement-quality rules."""
