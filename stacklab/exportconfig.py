"""Export a measured variant's configuration files, cleaned of lab paths, ready to adapt."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import StacklabError
from .store import RunRecord

# Lab paths become conventional places; ports become a placeholder to fill in.
_RUN_DIR = re.compile(r"/tmp/stacklab-\d+/s-[^/\s\"']+/[0-9a-f]{12}-r\d+/(?P<comp>[^/\s\"']+)")
_DOCROOT = re.compile(r"/tmp/stacklab-\d+/s-[^/\s\"']+/docroot-[^/\s\"']+")
_CERTS = re.compile(r"/tmp/stacklab-\d+/s-[^/\s\"']+/lab-(?P<what>cert|key)\.pem")
_PORT = re.compile(r"127\.0\.0\.1:\d{4,5}")


def clean(text: str) -> str:
    text = _CERTS.sub(lambda m: f"/etc/ssl/stacklab/{m['what']}.pem", text)
    text = _DOCROOT.sub("/var/www/html", text)
    text = _RUN_DIR.sub(lambda m: f"/var/lib/stacklab/{m['comp']}", text)
    return _PORT.sub("127.0.0.1:PORT", text)


def export_config(run: RunRecord, label: str, out_dir: Path) -> list[Path]:
    if not run.configs:
        raise StacklabError(f"run {run.trial_id} #{run.repetition} stored no configuration")
    written = []
    for name, text in sorted(run.configs.items()):
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(clean(text))
        written.append(target)
    readme = out_dir / "README.txt"
    readme.write_text(
        f"Configuration of the measured variant: {label}\n"
        f"trial {run.trial_id}, repetition {run.repetition}, run ended {run.ended_at}\n\n"
        "Rendered by stacklab for a lab run and cleaned of lab paths:\n"
        "  /var/www/html             the document root\n"
        "  /var/lib/stacklab/<name>  the component's run directory (pid, logs, sockets)\n"
        "  /etc/ssl/stacklab/*.pem   the TLS certificate and key\n"
        "  127.0.0.1:PORT            the listening address: choose yours\n\n"
        "Knob values:\n" + json.dumps(run.knobs, indent=2, sort_keys=True) + "\n\n"
        "Versions measured:\n" + json.dumps(run.versions, indent=2, sort_keys=True) + "\n")
    return [*written, readme]
