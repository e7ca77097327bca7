"""What every layer may use: the settings, logging, metrics and the in-memory outcome timeline."""
