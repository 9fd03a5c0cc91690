"""netlab: the network and the operating system as layers of an experiment."""
