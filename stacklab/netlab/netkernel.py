"""What this kernel lets a network namespace do, asked of the kernel itself: which net.*
sysctls are per namespace (set inside, read back inside and on the host) and which
qdiscs exist (tried on a veth in a throw-away namespace), each with the kernel's answer.

Apart from net.py because these are questions about the kernel, not about one link:
validation and the inventory ask them before any link exists; a link only uses
`set_sysctls` for its server namespace.
"""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

from ..errors import printable
from .netns import CMD_TIMEOUT_S, _probe_namespace, _run, check_namespace

SYSCTL_KEY = re.compile(r"net(?:\.[a-z0-9_]+){2,4}")
SYSCTL_VALUE = re.compile(r"\d{1,12}(?: \d{1,12}){0,3}")
# Of the S1/S5 network sysctls, those this kernel (6.18) keeps per network namespace,
# found by writing each inside a fresh namespace and reading it back inside and on the
# host (`sysctl_is_namespaced`; a test pins this list to that probe). net.core.rmem_max,
# wmem_max, rmem_default and wmem_default are read-only inside a namespace here (mode
# 0444 under /proc/sys; `sysctl -w` says "Invalid argument") and stay global.
NAMESPACED_SYSCTLS = ("net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
                      "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_time",
                      "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.somaxconn")
GLOBAL_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default",
                  "net.core.wmem_default")


def check_sysctl(key: str, value: str | int) -> str:
    """The value as `sysctl -w` takes it ("4096 87380 6291456" for a vector)."""
    if not isinstance(key, str) or not SYSCTL_KEY.fullmatch(key):
        raise ValueError(f"sysctl {key!r}: only net.* keys (lowercase, dotted) can be set in "
                         "a network namespace")
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not SYSCTL_VALUE.fullmatch(" ".join(text.split())):
        raise ValueError(f"sysctl {key}: value {value!r} is not one to four non-negative "
                         "integers")
    return " ".join(text.split())


# --- sysctls --------------------------------------------------------------------------

def _host_sysctl(key: str) -> str:
    return " ".join(Path("/proc/sys", *key.split(".")).read_text().split())


def ns_sysctl(ns: str, key: str) -> str:
    return " ".join(_run(["ip", "netns", "exec", ns, "sysctl", "-n", key]).split())


def set_sysctls(ns: str, values: dict[str, str | int]) -> None:
    """Write each sysctl inside `ns`, then check it took effect there and left the
    host's value alone; ValueError naming the key otherwise (a global one is put back)."""
    check_namespace(ns)
    checked = {k: check_sysctl(k, v) for k, v in values.items()}
    for key, value in checked.items():
        host_before = _host_sysctl(key)
        said = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-w", f"{key}={value}"],
                              capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
        inside, host_after = ns_sysctl(ns, key), _host_sysctl(key)
        if host_after != host_before:
            Path("/proc/sys", *key.split(".")).write_text(host_before)
            raise ValueError(f"sysctl {key} is not per-namespace on this kernel: writing it "
                             f"inside {ns} changed the host's value (put back to "
                             f"{host_before!r})")
        if inside != value:
            why = printable(said.stderr.strip()) or f"it reads {inside!r}"
            raise ValueError(f"sysctl {key} is not per-namespace on this kernel: writing "
                             f"{value!r} inside {ns} left it at {inside!r} and the host's at "
                             f"{host_after!r} ({why})")


def sysctl_is_namespaced(key: str) -> tuple[bool, str]:
    """Whether `key` can be set per network namespace here, found by setting it (to a
    value other than its current one) in a throw-away namespace."""
    check_sysctl(key, 0)
    with _probe_namespace() as ns:
        parts = ns_sysctl(ns, key).split()
        last = int(parts[-1])
        parts[-1] = str(last - 1 if last > 0 else 1)
        value = " ".join(parts)
        try:
            set_sysctls(ns, {key: value})
        except ValueError as e:
            return False, str(e)
    return True, f"{value!r} written inside a namespace took, the host kept its value"


# --- probes ---------------------------------------------------------------------------

def qdisc_available(kind: str, params: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Whether the kernel takes a `kind` qdisc: tried on a veth in a throw-away
    namespace; the reason is the kernel's own answer (and its config line, if shown)."""
    if not re.fullmatch(r"[a-z_]{1,16}", kind) or not all(
            re.fullmatch(r"[a-z0-9.]{1,16}", p) for p in params):
        raise ValueError(f"qdisc {kind!r} {params!r}: not a plain qdisc kind and parameters")
    with _probe_namespace() as ns:
        _run(["ip", "-n", ns, "link", "add", "stlprobe0", "type", "veth",
              "peer", "name", "stlprobe1"])
        tried = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "stlprobe0", "root",
                                kind, *params], capture_output=True, text=True,
                               timeout=CMD_TIMEOUT_S)
        if tried.returncode != 0:
            config = _kernel_config(f"NET_SCH_{kind.upper()}")
            return False, (f"the kernel refuses a {kind} qdisc: tc says "
                           f"{printable(tried.stderr.strip())!r}"
                           + (f"; kernel config: {config}" if config else ""))
    return True, f"a {kind} qdisc was added on a veth in a throw-away namespace"


def netem_available() -> tuple[bool, str]:
    """Whether delay and loss can be emulated (sch_netem)."""
    return qdisc_available("netem", ("delay", "1ms"))


def fq_available() -> tuple[bool, str]:
    """Whether the fair-queue qdisc (sch_fq: pacing) exists."""
    return qdisc_available("fq")


def _kernel_config(option: str) -> str | None:
    """How /proc/config.gz sets CONFIG_<option> ("# CONFIG_X is not set"), if shown."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if re.fullmatch(rf"(# )?CONFIG_{option}[= ].*", line.strip()):
                    return line.strip()
    except OSError:
        return None
    return None
