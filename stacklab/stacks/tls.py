"""TLS for the lab: one self-signed RSA 2048 certificate per lab session, and the knobs
every TLS-capable server shares."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import StackError
from ..knobs import Knob

PROTOCOLS = ("TLSv1.2 TLSv1.3", "TLSv1.2", "TLSv1.3")
CIPHERS = ("default", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
           "ECDHE-RSA-CHACHA20-POLY1305")


ON = {"tls": True}     # every TLS setting acts only with the server's tls knob on


def tls_knobs(component: str) -> list[Knob]:
    return [
        Knob(component, "tls", bool, False, "Serve HTTPS with the lab's self-signed RSA 2048 "
             "certificate.", source="S2"),
        Knob(component, "tls_protocols", str, PROTOCOLS[0], "TLS protocol versions offered.",
             choices=PROTOCOLS, acts_with=ON),
        Knob(component, "tls_ciphers", str, "default", "TLS 1.2 cipher suite (default: the "
             "server's own list).", choices=CIPHERS, acts_with=ON),
        Knob(component, "tls_session_cache", bool, True, "Server-side TLS session cache "
             "(resumption by session id).", acts_with=ON),
        Knob(component, "tls_session_tickets", bool, True, "TLS session tickets "
             "(resumption without server state).", acts_with=ON),
    ]


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """Generate (once) a self-signed certificate for CN=localhost, IP 127.0.0.1."""
    cert, key = directory / "lab-cert.pem", directory / "lab-key.pem"
    if cert.exists() and key.exists():
        return cert, key
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise StackError(f"openssl could not make the lab certificate: {result.stderr.strip()}")
    key.chmod(0o644)   # servers that drop to www-data read it after the drop (lab-only key)
    return cert, key
