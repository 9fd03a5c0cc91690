"""What the shared TLS knobs (tls.py) mean on today's software, and when they act.

With both protocols offered (the default), OpenSSL 3 on the server and the load engine's
rustls negotiate TLS 1.3. There a resumption is always a pre-shared key from a session
ticket: with tickets on the ticket carries the session (stateless), with tickets off
OpenSSL issues stateful tickets that name an entry of the server's session cache. The
studies' "session id" resumption is TLS 1.2's: set tls_protocols = "TLSv1.2" for it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..knobs import Knob

MEANINGS = {
    "tls_protocols": "TLS protocol versions offered. With both (the default), the server's "
                     "OpenSSL and the load engine's rustls negotiate TLS 1.3; TLSv1.2 "
                     "measures the studies' TLS 1.2 handshakes.",
    "tls_ciphers": "TLS 1.2 cipher suite (default: the server's own list). Acts only where "
                   "TLS 1.2 is negotiated: with tls_protocols = TLSv1.2 (the engine "
                   "negotiates TLS 1.3 whenever it is offered).",
    "tls_session_cache": "Server-side TLS session cache. TLS 1.2: resumption by session id. "
                         "TLS 1.3 (negotiated by default): with tickets off, the tickets "
                         "OpenSSL issues name an entry of this cache (stateful tickets).",
    "tls_session_tickets": "TLS session tickets. TLS 1.2: resumption without server state. "
                           "TLS 1.3 (negotiated by default) resumes only by tickets; off, "
                           "they are stateful (need the session cache) instead of carrying "
                           "the session.",
}


def described(knob: Knob) -> Knob:
    """A knob of tls_knobs() with the meaning above (what `stacklab stacks` shows)."""
    return replace(knob, meaning=MEANINGS[knob.name]) if knob.name in MEANINGS else knob


def tls_inert(component: str, k: dict[str, Any]) -> dict[str, str]:
    """The component's TLS knobs that cannot act with these values, and why, beyond
    `acts only with <component>.tls on`, which the knobs themselves declare (tls.py)."""
    if k["tls"] and "TLSv1.3" in k["tls_protocols"].split():
        return {f"{component}.tls_ciphers": "a TLS 1.2 cipher suite, and TLS 1.3 is "
                f"negotiated with {component}.tls_protocols = {k['tls_protocols']!r}"}
    return {}
