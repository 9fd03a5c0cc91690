"""Export a measured variant's configuration files, cleaned of lab paths, ready to adapt."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..host import lab
from ..errors import StacklabError, UnsafePathError, control_character
from ..store import RunRecord

# A lab session directory, wherever the temp dir is: <tmp>/stacklab-<uid>/s-<pid>-<hex>,
# matched by the lab's own names for them (lab.py makes them from the same templates).
_NAME = r"[^/\s\"':;|]+"
_SESSION = rf"(?:/{_NAME})*/{lab.pattern(lab.ROOT)}/{lab.pattern(lab.SESSION)}"
# A run directory's socket directory in a registry entry (lab.socket_path: where its
# sockets go when the run directory's path is too long for one), named by its component.
_REGISTRY = rf"(?:{re.escape(str(lab.REGISTRY_AS_ROOT))}|/tmp/{lab.pattern(lab.REGISTRY)})"
_SOCKETS = rf"{_REGISTRY}/{lab.pattern(lab.ENTRY)}/{lab.pattern(lab.SOCKET_DIR, 'label')}"
# Lab paths become conventional places; ports become a placeholder to fill in.
_RULES = [
    (re.compile(_SOCKETS), lambda m: f"/var/lib/stacklab/{m['label']}"),
    (re.compile(_SESSION + r"/lab-(?P<what>cert|key)\.pem"),
     lambda m: f"/etc/ssl/stacklab/{m['what']}.pem"),
    (re.compile(_SESSION + "/" + lab.pattern(lab.DOCROOT)), lambda m: "/var/www/html"),
    (re.compile(_SESSION + "/" + lab.pattern(lab.CACHE) + r"/(?P<rest>" + _NAME + ")"),
     lambda m: f"/var/lib/stacklab/data/{m['rest'].split('-')[0]}"),
    (re.compile(_SESSION + "/" + lab.pattern(lab.RUN) + r"/(?P<comp>" + _NAME + ")"),
     lambda m: f"/var/lib/stacklab/{m['comp']}"),
    (re.compile(_SESSION), lambda m: "/var/lib/stacklab"),
    (re.compile(r"127\.0\.0\.1:\d{4,5}"), lambda m: "127.0.0.1:PORT"),
]


def clean(text: str) -> str:
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def _target(out_dir: Path, name: str) -> Path:
    """Where the stored config `name` is written: inside out_dir, or UnsafePathError. A
    results database may be shared: its names are input, like a spec's keys."""
    root = out_dir.resolve()
    if Path(name).is_absolute():
        why = "is absolute"
    elif c := control_character(name, allowed=""):
        why = f"contains {c!r}"
    elif root not in (root / name).resolve().parents:     # ../, or through a symlink
        why = f"names no file inside {str(out_dir)!r}"
    else:
        return out_dir / name
    raise UnsafePathError(f"stored config name {name!r} {why}: nothing exported")


def export_config(run: RunRecord, label: str, out_dir: Path,
                  why: list[str] | None = None) -> list[Path]:
    """The run's configuration files under out_dir, and README.txt: what was measured,
    the lab paths' replacements, and (`why`) each setting away from its default with the
    measurement that chose it."""
    if not run.configs:
        raise StacklabError(f"run {run.trial_id} #{run.repetition} stored no configuration")
    targets = {name: _target(out_dir, name) for name in sorted(run.configs)}
    written = []
    for name, text in sorted(run.configs.items()):
        target = targets[name]
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
        "  /var/lib/stacklab/data/*  a database's data directory\n"
        "  /etc/ssl/stacklab/*.pem   the TLS certificate and key\n"
        "  127.0.0.1:PORT            the listening address: choose yours\n\n"
        "Knob values:\n" + json.dumps(run.knobs, indent=2, sort_keys=True) + "\n\n"
        + ("What changed from the defaults, and why (measured in the same experiment):\n"
           + "".join(f"  {line}\n" for line in why) + "\n" if why else "")
        + "Versions measured:\n" + json.dumps(run.versions, indent=2, sort_keys=True) + "\n")
    return [*written, readme]
