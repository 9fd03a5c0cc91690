"""The fake stacklab-load: the real engine's command line, exit statuses and JSON report
(engine/README.md), with no request sent. The orchestrator runs it as it runs the real
one (drive.engine_path: STACKLAB_ENGINE), so a test of what happens around a load needs
no patched internals and no built engine.

What it keeps of the real engine, because the orchestrator relies on it:
- the flags drive.engine_argv builds, checked alike: a bad one is one line on stderr
  ("error: …") and exit 2, nothing run;
- the report follows the engine's schema (fakes.fake_load checks it), and its histogram
  holds as many values as the requests it claims; `-n N` completes exactly N;
- a URL list line's own method ("HEAD http://…") and a replay's `--schedule FILE`
  ("OFFSET_US URL_INDEX" per line, in order; without -n, -d, --rate or --warmup), read
  and refused as the engine reads them; a schedule completes each of its entries;
- `--segment K/N` (echoed in `config.segment`; a replay keeps entries K, K+N, …) and
  `--start-at UNIX_SECONDS` (at most 300 s ahead: it waits for that instant, and `start`
  says when it began), read and refused as the engine reads them;
- it takes the planned time (warm-up, then `-d`, or `-n` at `--rate`, or a schedule's
  last offset), and SIGINT,
  SIGTERM or SIGHUP end it early with `"interrupted": true` and exit 130;
- `--report-file FILE`: opened before the run (one that cannot be is refused, exit 2);
  the report is written over its start, the file cut to it and synced before the report
  is printed and the process exits.

What a test may ask of it, by environment (it inherits the orchestrator's):
- FAKE_ENGINE_LOG: a directory where each load leaves `run-<n>.json`, {"argv", "report"}:
  what it was asked and what it claimed, in order;
- FAKE_ENGINE_DURING: a shell command run during the load (a disk filled, a file made
  immutable), before the report is printed; its failure is a setup error (exit 2);
- FAKE_ENGINE_REFUSE: every load is refused, as the real engine refuses a bad argument
  (one line, "error: <the value>", exit 2, nothing run), and leaves `refused-<n>.json`,
  {"argv"}, in FAKE_ENGINE_LOG: where nothing may be measured (a resume that only stores
  what was measured before), a test reads there that nothing was. `--version` still
  answers: it measures nothing;
- FAKE_ENGINE_ALPN: what a TLS server chose by ALPN; with `--protocol h2` and another
  choice every request fails as `tls`, nothing completes, and `tls.alpn` says the choice
  (as the real engine against a server that does not offer h2)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

VERSION = "0.0.0-fake"         # stored as the engine's version: a fake run says so
RPS = 5000.0                   # the figures it claims: latency follows by Little's law
EXIT_OK, EXIT_USAGE, EXIT_NOTHING_COMPLETED, EXIT_INTERRUPTED = 0, 2, 3, 130
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """"500ms", "2.0s", "1m" in seconds, as the engine reads them."""
    if not (m := _DURATION.fullmatch(text)):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 500ms, 10s, 2m)")
    return float(m[1]) * _UNIT_S[m[2]]


def positive_duration(text: str) -> float:
    """A duration above 0 (-d, --timeout), as the engine's positive_duration."""
    value = duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
    return value


def fraction(text: str) -> float:
    """0..1 (--max-error-rate), as the engine's fraction."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a fraction like 0.01") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be between 0 and 1")
    return value


def method(text: str) -> str:
    """An upper-case token (-m), as the engine's parse_method."""
    if not re.fullmatch(r"[A-Z_-]+", text):
        raise argparse.ArgumentTypeError("expected an upper-case method token like GET")
    return text


def positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not above 0")
        return value
    return parse


_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def header(text: str) -> str:
    """'Name: value' with a token name and no line break, as the engine's parse_header."""
    name, colon, value = text.partition(":")
    if not colon or not _TOKEN.fullmatch(name.strip()) or "\r" in value or "\n" in value:
        raise argparse.ArgumentTypeError(f"invalid header {text!r} (expected 'Name: value')")
    return f"{name.strip()}: {value.strip()}"


def segment(text: str) -> dict:
    """K/N with 0 <= K < N <= 1024 (--segment), as the engine's Segment::parse."""
    k, slash, n = text.partition("/")
    if not (slash and k.isdigit() and n.isdigit() and int(k) < int(n) <= 1024):
        raise argparse.ArgumentTypeError(f"{text!r}: expected K/N with 0 <= K < N <= 1024")
    return {"index": int(k), "of": int(n)}


def start_at(text: str) -> int:
    """Decimal seconds since the epoch (--start-at), in µs; at most 300 s ahead."""
    whole, _, fraction = text.partition(".")
    if not whole.isdigit() or not (fraction.isdigit() or not fraction):
        raise argparse.ArgumentTypeError(f"{text!r}: expected decimal seconds since the epoch")
    at_us = int(whole) * 1_000_000 + int((fraction + "000000")[:6])
    if at_us - time.time_ns() // 1000 > 300_000_000:
        raise argparse.ArgumentTypeError(f"{text}: more than 300 s in the future")
    return at_us


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line naming the flag, exit 2 (clap's usage error, as the engine prints)."""
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def parser() -> Parser:
    p = Parser(prog="stacklab-load", add_help=False)
    p.add_argument("urls", nargs="*")
    p.add_argument("-c", "--connections", type=positive(int), default=10)
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("-n", "--requests", type=positive(int))
    stop.add_argument("-d", "--duration", type=positive_duration)
    p.add_argument("--threads", type=positive(int))
    p.add_argument("--rate", type=positive(float))
    p.add_argument("--warmup", type=duration, default=0.0)
    p.add_argument("--no-keepalive", action="store_true")
    p.add_argument("-H", "--header", dest="headers", type=header, action="append",
                   default=[])
    p.add_argument("-m", "--method", type=method, default="GET")
    p.add_argument("--compressed", action="store_true")
    p.add_argument("--decode", action="store_true")
    p.add_argument("--timeout", type=positive_duration, default=30.0)
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--tls-resume", action="store_true")
    p.add_argument("--no-tls-resume", action="store_true")
    p.add_argument("--urls", dest="url_file", type=Path)
    p.add_argument("--schedule", type=Path)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-error-rate", type=fraction)
    p.add_argument("--allow-remote", action="store_true")
    p.add_argument("--protocol", choices=("http/1.1", "h2", "h2c"), default="http/1.1")
    p.add_argument("--streams", type=positive(int), default=1)
    p.add_argument("--lab-netns")
    p.add_argument("--segment", type=segment)
    p.add_argument("--start-at", type=start_at)
    p.add_argument("--report-file", type=Path)
    p.add_argument("--json", action="store_true")
    p.add_argument("--version", action="store_true")
    return p


def url_list(args) -> list[dict]:
    """The URLs as the report's config lists them: the arguments, then the file's lines
    ("[METHOD] URL [weight] [varies]", '#' comments)."""
    urls = [{"url": u, "weight": 1, "varies": False, "method": args.method}
            for u in args.urls]
    if args.url_file is not None:
        try:
            lines = args.url_file.read_text().splitlines()
        except OSError as e:
            raise SystemExit(_usage(f"--urls {args.url_file}: {e.strerror}"))
        for line in lines:
            words = line.split("#", 1)[0].split()
            own = words[0] if words and "://" not in words[0] else None
            if own is not None:
                if not re.fullmatch(r"[A-Z_-]+", own):
                    raise SystemExit(_usage(f"--urls {args.url_file}: bad method '{own}'"))
                words = words[1:]
            if words:
                urls.append({"url": words[0], "weight": int(words[1]) if len(words) > 1
                             else 1, "varies": words[2:] == ["varies"],
                             "method": own or args.method})
    if not urls:
        raise SystemExit(_usage("URL: no URL given (pass URL... or --urls FILE)"))
    for u in urls:
        if not re.match(r"(?i)https?://", u["url"]):
            raise SystemExit(_usage(f"URL {u['url']}: unsupported scheme (use http or https)"))
    return urls


def _usage(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return EXIT_USAGE


def schedule(args, urls: list[dict]) -> list[float] | None:
    """A replay's offsets in seconds, read and refused as the engine's Schedule::parse
    (an index into the URL list, offsets never going back); None without --schedule."""
    if args.schedule is None:
        return None
    if args.requests is not None or args.duration is not None or args.rate or args.warmup:
        raise SystemExit(_usage("--schedule: cannot be used with -n, -d, --rate or --warmup"))
    try:
        lines = args.schedule.read_text().splitlines()
    except OSError as e:
        raise SystemExit(_usage(f"--schedule {args.schedule}: {e.strerror}"))
    offsets: list[float] = []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if (len(words) != 2 or not all(w.isdigit() for w in words)
                or int(words[1]) >= len(urls)
                or (offsets and int(words[0]) / 1e6 < offsets[-1])):
            raise SystemExit(_usage(f"--schedule {args.schedule}: line {number}: bad entry"))
        offsets.append(int(words[0]) / 1e6)
    if not offsets:
        raise SystemExit(_usage(f"--schedule {args.schedule}: no entries in file"))
    if args.segment and not (offsets := offsets[args.segment["index"]::args.segment["of"]]):
        raise SystemExit(_usage("--segment: the schedule leaves this segment none"))
    return offsets


def planned_s(args) -> tuple[float, float]:
    """(warm-up, measured phase) in seconds: what the real engine would take, serving
    RPS requests a second in closed loop."""
    if args.requests is None:
        return args.warmup, args.duration if args.duration is not None else 10.0
    return args.warmup, args.requests / (args.rate or RPS)


def stop_on_signals() -> threading.Event:
    """Set by SIGINT, SIGTERM or SIGHUP, which end the run early (also twice over)."""
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopped.set())
    return stopped


def during() -> None:
    if command := os.environ.get("FAKE_ENGINE_DURING"):
        if (status := subprocess.run(command, shell=True).returncode) != 0:
            raise SystemExit(_usage(f"FAKE_ENGINE_DURING exited {status}: {command}"))


def report(args, urls: list[dict], measured_s: float, interrupted: bool,
           offsets: list[float] | None = None, began_unix_us: int = 0) -> dict:
    """The report of the run asked for, checked against the engine's schema."""
    from fakes import checked, fake_load     # after --version: a quick answer
    duration_s = max(measured_s, 0.001)
    if args.requests is not None and not interrupted:
        completed = args.requests
    else:
        completed = int(RPS * measured_s)
    alpn = os.environ.get("FAKE_ENGINE_ALPN") if args.protocol == "h2" else None
    refused = completed if alpn not in (None, "h2") else 0     # every request a tls error
    completed -= refused
    threads = min(args.threads or os.cpu_count() or 1, args.connections)
    config = {"urls": urls, "connections": args.connections, "threads": threads,
              "requests": args.requests, "duration_s": args.duration, "rate": args.rate,
              "warmup_s": args.warmup, "keepalive": not args.no_keepalive,
              "method": args.method, "headers": args.headers, "body_bytes": None,
              "compressed": args.compressed, "decode": args.decode,
              "timeout_s": args.timeout, "insecure": args.insecure,
              "tls_resume": not args.no_tls_resume, "seed": args.seed,
              "allow_remote": args.allow_remote, "max_error_rate": args.max_error_rate,
              "schedule": offsets and {"requests": len(offsets),
                                       "span_s": offsets[-1] - offsets[0]},
              "protocol": args.protocol, "streams": args.streams,
              "segment": args.segment}
    rps = completed / duration_s
    doc = fake_load(rps or RPS, args.connections * 1e6 / (rps or RPS), args.seed,
                    duration_s=duration_s, threads=threads, warmup_s=args.warmup,
                    completed=completed, config=config, interrupted=interrupted)
    doc["rps"] = rps
    doc["engine"]["version"] = VERSION
    doc["start"] = {"asked_unix_us": args.start_at, "unix_us": began_unix_us,
                    "first_send_unix_us": began_unix_us + 150 if completed or refused
                    else None}
    if alpn:
        doc["tls"].update(protocol="TLSv1.3", cipher="TLS13_AES_256_GCM_SHA384",
                          handshakes=args.connections, resumed=0, alpn=alpn)
    if refused:
        doc["requests"]["failed"] = refused
        doc["requests"]["errors"]["tls"] = refused
    if args.requests is not None and not interrupted:     # -n: every request answered
        doc["in_flight"].update(count=0, age_us_max=0, age_us_median=0)
    return checked(doc)


def report_file(path: Path | None) -> int | None:
    """--report-file's descriptor, opened before the run as the engine opens it (created
    if missing, not truncated), its name synced; None without one."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as e:
        raise SystemExit(_usage(f"--report-file '{path}': {e.strerror}"))
    return fd


def write_report(fd: int | None, doc: dict) -> None:
    """The report over the file's start, the file cut to it and synced (the engine's
    ReportFile::write)."""
    if fd is None:
        return
    data = (json.dumps(doc, indent=2) + "\n").encode()
    written = 0
    while written < len(data):
        written += os.pwrite(fd, data[written:], written)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    os.close(fd)


def log(argv: list[str], doc: dict | None, kind: str = "run") -> None:
    """`<kind>-<n>.json` in FAKE_ENGINE_LOG: the argv, and the report when one was given."""
    if not (where := os.environ.get("FAKE_ENGINE_LOG")):
        return
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob(f"{kind}-*.json"))) + 1
    part = folder / f".{kind}-{n}.json.part"
    part.write_text(json.dumps({"argv": argv} if doc is None else
                               {"argv": argv, "report": doc}))
    part.rename(folder / f"{kind}-{n}.json")      # whole, or not there


def main(argv: list[str]) -> int:
    stopped = stop_on_signals()
    args = parser().parse_args(argv)
    if args.decode and not args.compressed:
        return _usage("--decode: requires --compressed")
    if args.version:
        print(f"stacklab-load {VERSION}")
        return EXIT_OK
    if refusal := os.environ.get("FAKE_ENGINE_REFUSE"):
        log(argv, None, "refused")
        return _usage(refusal)
    urls = url_list(args)
    offsets = schedule(args, urls)
    written = report_file(args.report_file)
    if offsets:                   # a replay: each entry once, over its span
        args.requests = len(offsets)
    warmup_s, measured_s = ((0.0, max(offsets[-1], 0.001)) if offsets else planned_s(args))
    if args.start_at is not None:          # set up: wait for the agreed instant
        stopped.wait(max(0.0, args.start_at / 1e6 - time.time()))
    began, began_unix_us = time.monotonic(), time.time_ns() // 1000
    interrupted = stopped.is_set() or stopped.wait(warmup_s + measured_s)
    during()
    if interrupted:
        measured_s = max(0.0, time.monotonic() - began - warmup_s)
    doc = report(args, urls, measured_s, interrupted, offsets, began_unix_us)
    log(argv, doc)
    write_report(written, doc)          # before the exit, as the engine does
    print(json.dumps(doc))
    if interrupted:
        return EXIT_INTERRUPTED
    if not doc["requests"]["completed"]:
        print("stacklab-load: no request completed", file=sys.stderr)
        return EXIT_NOTHING_COMPLETED
    return EXIT_OK


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/: fakes
    sys.exit(main(sys.argv[1:]))
