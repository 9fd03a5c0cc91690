"""S1's methods beside a plain run: the request breakdown, the database alone, and the
winners combined."""
