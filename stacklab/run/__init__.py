"""One run, built from layers: the plan's check, the stack's lifecycle, the measurement, the
checks after it, and the runner that stores each run as it finishes."""
