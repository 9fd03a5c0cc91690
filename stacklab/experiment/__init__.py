"""What an experiment asks: the experiment file read as a spec, expanded into a plan of
trials."""
