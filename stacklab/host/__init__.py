"""The machine the lab runs on: its processes, CPUs, interrupts and system settings, where
a component listens, the lab directory, and the host facts a result carries."""
