"""Perl itself, as Apache runs it: not a process of its own but the perl:* capabilities
(capabilities.py) that Apache provides by its perl_handler, each with the probe and the
verifier that check it."""

from .capabilities import CAPABILITIES, PROBE_PATH, verify_perl

__all__ = ["CAPABILITIES", "PROBE_PATH", "verify_perl"]
