"""The lab's own layers under every stack, set for every trial whatever its stack:
`net.*`, where the stack and the load engine meet — the host's loopback, or two network
namespaces of the lab's own joined by a veth pair (a rate-limited link, the server side's
TCP settings); `fs.*`, the filesystem the docroot lies on; `machine.*`, the CPUs, CPU time
and memory the stack's processes may use (a cgroup)."""

from functools import partial

from ..knobs import Knob

COMPONENT = "net"
knob = partial(Knob, COMPONENT)   # every knob below is one of this component
ON_VETH = "acts only with net.mode = \"veth\" (loopback has no link and the host's own " \
          "settings)"
LINK_RATES = ("unlimited", "10gbit", "1gbit", "100mbit", "10mbit")
# S1's TCP settings and S5's somaxconn, written in the server's namespace only. "kernel"
# (or 0) leaves the namespace's own default.
SYSCTLS = {
    "tcp_sack": "net.ipv4.tcp_sack",
    "tcp_timestamps": "net.ipv4.tcp_timestamps",
    "tcp_fin_timeout": "net.ipv4.tcp_fin_timeout",
    "tcp_keepalive_time": "net.ipv4.tcp_keepalive_time",
    "tcp_rmem": "net.ipv4.tcp_rmem",
    "tcp_wmem": "net.ipv4.tcp_wmem",
    "somaxconn": "net.core.somaxconn",
    "rmem_max": "net.core.rmem_max",
    "wmem_max": "net.core.wmem_max",
}
veth = partial(knob, acts_with={"mode": "veth"}, inert_why=ON_VETH)


def three_sizes(value: str) -> str | None:
    """tcp_rmem/tcp_wmem: "kernel", or three byte counts min <= default <= max."""
    parts = value.split()
    if value == "kernel":
        return None
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return "expected \"kernel\" or three byte counts \"min default max\""
    low, mid, high = map(int, parts)
    return None if 0 < low <= mid <= high <= 1 << 30 else "needs 0 < min <= default <= max"



KNOBS = [
    knob("mode", str, "loopback", "loopback: stack and engine on the host's loopback; veth: "
         "each in a network namespace of the lab's own (addresses in 198.18.0.0/15), "
         "joined by a veth pair, so the load crosses a network stack as S4's network "
         "measurements did.", choices=("loopback", "veth"), source="S1, S4"),
    veth("link", str, "unlimited", "The veth link's rate, shaped by tc tbf on both ends "
         "(S2 compared 100 Mbit and 1 Gbit); measured before the run.", choices=LINK_RATES,
         source="S2"),
    veth("rtt_ms", int, 0, "Added round-trip time in ms (tc netem); refused on a kernel "
         "without netem.", min=0, max=1000, unit="ms"),
    veth("tcp_sack", str, "kernel", "net.ipv4.tcp_sack in the server's namespace.",
         choices=("kernel", "0", "1"), source="S1"),
    veth("tcp_timestamps", str, "kernel", "net.ipv4.tcp_timestamps in the server's "
         "namespace.", choices=("kernel", "0", "1"), source="S1"),
    veth("tcp_fin_timeout", int, 0, "net.ipv4.tcp_fin_timeout (s) in the server's namespace "
         "(0 = the kernel's).", min=0, max=600, source="S1", unit="s"),
    veth("tcp_keepalive_time", int, 0, "net.ipv4.tcp_keepalive_time (s) in the server's "
         "namespace (0 = the kernel's).", min=0, max=86400, source="S1", unit="s"),
    veth("tcp_rmem", str, "kernel", "net.ipv4.tcp_rmem \"min default max\" in the server's "
         "namespace.", source="S1", validate=three_sizes),
    veth("tcp_wmem", str, "kernel", "net.ipv4.tcp_wmem \"min default max\" in the server's "
         "namespace.", source="S1", validate=three_sizes),
    veth("somaxconn", int, 0, "net.core.somaxconn in the server's namespace (0 = the "
         "kernel's).", min=0, max=65535, source="S5"),
    veth("rmem_max", int, 0, "net.core.rmem_max (bytes; 0 = the kernel's); refused where "
         "it is not per namespace.", min=0, max=1 << 30, source="S1", unit="bytes"),
    veth("wmem_max", int, 0, "net.core.wmem_max (bytes; 0 = the kernel's); refused where "
         "it is not per namespace.", min=0, max=1 << 30, source="S1", unit="bytes"),
]


def sysctls(knobs: dict) -> dict[str, str]:
    """The sysctls a trial's net.* knobs set (key -> value), the kernel's left alone."""
    out = {}
    for name, key in SYSCTLS.items():
        value = knobs[name]
        if value not in ("kernel", 0):
            out[key] = str(value)
    return out


def fs_options(value: str) -> str | None:
    """fs.options: mount options separated by commas; which ones a filesystem takes is
    checked with the filesystem (fs.py) when the plan is validated."""
    parts = [p for p in value.split(",") if p]
    if any(not (p.isascii() and p.replace("=", "").replace("_", "").isalnum())
           for p in parts):
        return "expected mount options separated by commas, such as \"noatime\""
    return None


ON_FS = "acts only with fs.type set (the docroot on a filesystem of the run's own)"
on_fs = partial(Knob, "fs", acts_with={"type": ("tmpfs", "ext3", "ext4", "xfs", "btrfs",
                                                "jfs", "reiserfs")}, inert_why=ON_FS)
FS_KNOBS = [
    Knob("fs", "type", str, "none", "The filesystem the docroot lies on, made for the run: "
         "none (the lab's own directory), tmpfs (a ramdisk), or ext3/ext4/xfs/btrfs/jfs/"
         "reiserfs on a loop device (what this kernel lacks is refused with its reason). "
         "The run's own directory (logs, sessions, temp files) is a fresh one of the same "
         "type; with none, a fresh tmpfs.",
         choices=("none", "tmpfs", "ext3", "ext4", "xfs", "btrfs", "jfs", "reiserfs"),
         source="S1"),
    on_fs("options", str, "", "Mount options, comma-separated (noatime, nodiratime, "
          "relatime, strictatime; data=… for ext3/ext4).", source="S1",
          validate=fs_options),
    on_fs("size_mb", int, 512, "The filesystem's size in MB (at least the workload's files; "
          "xfs needs 300).", min=16, max=65536, unit="MB"),
    on_fs("cold_cache", bool, False, "Start every run with the docroot's files out of the "
          "page cache (unmount and mount again, as S1 rebooted); not on tmpfs. Use no "
          "warm-up to measure the cold reads.", source="S1"),
]
MACHINE_KNOBS = [
    Knob("machine", "cpus", int, 0, "CPUs the stack's processes may run on (a cpuset of "
         "the first N; 0 = all), standing in for a smaller machine (S2).", min=0, max=256,
         source="S2"),
    Knob("machine", "cpu_quota", float, 0.0, "Cores' worth of CPU time the stack may use "
         "(CFS quota: 0.5 = half a core; 0 = no limit).", min=0.0, max=256.0, source="S2"),
    Knob("machine", "memory_mb", int, 0, "Memory limit of the stack's processes in MiB "
         "(0 = none): files larger than its memory, as S1's large-file test.", min=0,
         max=1 << 20, source="S1, S2", unit="MiB"),
]
