"""Load from several agents (Dask distributed workers), merged into one exact result."""
