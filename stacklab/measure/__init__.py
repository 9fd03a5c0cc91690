"""The lab's instruments: the load engine, resource sampling, and verdicts checked over
the wire."""
