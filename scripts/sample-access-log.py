#!/usr/bin/env python3
"""Write presets/sample-access.log: a small access log in Combined Log Format (nginx's and
Apache's default) over the `portal-site` workload's URLs, for presets/replay.toml and the
replay tests. Seeded, so the file is the same on every run of this script:

    python3 scripts/sample-access-log.py > presets/sample-access.log

It holds what a real day's log holds, so that every rule of the replay shows: page views
(the portal page, then its stylesheet, scripts and images a second later, some answered
304), a query string or two, HEAD requests from a monitor, POSTs and 404s (counted
apart, not replayed) and a few lines no parser can read (counted by reason). Its traffic
rises to a peak and falls again over twenty minutes, so a replay with its times shows a
shape, not a flat rate."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

SEED = 24
START = datetime(2026, 11, 20, 9, 0, 0, tzinfo=timezone(timedelta(hours=1)))
MINUTES = 20
PAGE = "/portal.html"
SUBRESOURCES = ["/style.css", "/js/menu.js", "/js/site.js", "/img/logo.png",
                *(f"/img/teaser-{k}.png" for k in range(1, 9))]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
          "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like "
          "Gecko) Chrome/131.0 Safari/537.36",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15"]
# Lines a parser cannot read, as real logs hold them: a TLS handshake sent to the plain
# port, a line cut short by a full disk, a timestamp in another format, an empty line.
MALFORMED = ['198.51.100.77 - - [{t}] "\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xFC\\x03" 400 '
             '157 "-" "-"',
             '198.51.100.78 - - [{t}] "GET /portal.html HTTP/1.1" 200',
             '198.51.100.79 - - [2026-11-20T09:10:00+01:00] "GET /style.css HTTP/1.1" 200 '
             '812 "-" "curl/8.5.0"',
             '']


def stamp(when: datetime) -> str:
    return when.strftime("%d/%b/%Y:%H:%M:%S %z")


def line(client: str, when: datetime, request: str, status: int, size: int,
         referer: str = "-", agent: str = "-") -> str:
    return (f'{client} - - [{stamp(when)}] "{request}" {status} {size} "{referer}" '
            f'"{agent}"')


def views_per_minute(minute: int) -> int:
    """Page views in minute `minute`: a morning peak in the middle of the log."""
    return round(2 + 6 * math.exp(-((minute - MINUTES / 2) / 4) ** 2))


def page_view(rng: random.Random, when: datetime) -> list[tuple[datetime, str]]:
    """One visitor's view: the page, then (a second later) what it loads."""
    client = f"198.51.100.{rng.randint(2, 250)}"
    agent = rng.choice(AGENTS)
    query = rng.choice(["", "", "", "?ref=news", "?utm_source=mail"])
    out = [(when, line(client, when, f"GET {PAGE}{query} HTTP/1.1", 200, 10540, "-", agent))]
    later = when + timedelta(seconds=1)
    referer = f"http://portal.example{PAGE}"
    for path in SUBRESOURCES[:rng.randint(4, len(SUBRESOURCES))]:
        status, size = (304, 0) if rng.random() < 0.3 else (200, rng.randint(600, 9000))
        out.append((later, line(client, later, f"GET {path} HTTP/1.1", status, size,
                                referer, agent)))
    return out


def log_lines(rng: random.Random) -> list[str]:
    events: list[tuple[datetime, str]] = []
    for minute in range(MINUTES):
        base = START + timedelta(minutes=minute)
        for _ in range(views_per_minute(minute)):
            events += page_view(rng, base + timedelta(seconds=rng.randint(0, 58)))
        # a monitor's HEAD every half minute, a search form's POST, a stale favicon link
        for second in (0, 30):
            when = base + timedelta(seconds=second)
            events.append((when, line("192.0.2.10", when, f"HEAD {PAGE} HTTP/1.1", 200, 0,
                                      "-", "monitor/1.0")))
        if minute % 3 == 0:
            when = base + timedelta(seconds=rng.randint(0, 59))
            events.append((when, line("198.51.100.9", when, "POST /search HTTP/1.1", 200,
                                      2210, f"http://portal.example{PAGE}", AGENTS[0])))
        if minute % 4 == 1:
            when = base + timedelta(seconds=rng.randint(0, 59))
            events.append((when, line("198.51.100.12", when, "GET /favicon.ico HTTP/1.1",
                                      404, 153, "-", AGENTS[1])))
    events.sort(key=lambda e: e[0])          # stable: a view's lines stay in order
    lines = [text for _, text in events]
    for k, bad in enumerate(MALFORMED):     # spread over the log, at seeded places
        at = rng.randint(1, len(lines) - 1)
        lines.insert(at, bad.format(t=stamp(START + timedelta(minutes=5 * k))))
    return lines


if __name__ == "__main__":
    print("\n".join(log_lines(random.Random(SEED))))
