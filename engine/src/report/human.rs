//! The ab-like summary for people.

use std::fmt::Write;

use super::Report;
use crate::record::Stats;

pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let c = &r.config;
    let w = &mut out;
    let urls = c.urls.iter().map(|u| u.url.as_str()).collect::<Vec<_>>();
    let _ = writeln!(
        w,
        "Target:                 {}{}",
        urls[0],
        if urls.len() > 1 { format!(" (+{} more URLs)", urls.len() - 1) } else { String::new() }
    );
    let mode = match c.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".to_string(),
    };
    let _ = writeln!(
        w,
        "Load:                   {} connections, {} threads, {mode}, {}",
        c.connections,
        c.threads,
        if c.keepalive { "keep-alive" } else { "new connection per request" }
    );
    if c.protocol != "http/1.1" {
        let got = match (&r.protocol, &r.tls.alpn) {
            (Some(p), _) => format!(
                "{p}, {} streams per connection, {} requests sent again on a new connection",
                c.streams, r.requests.retried
            ),
            (None, Some(alpn)) => format!("none: the server chose {alpn} by ALPN"),
            (None, None) => "none: no response completed".to_string(),
        };
        let _ = writeln!(w, "Protocol:               {} asked, {got}", c.protocol);
    }
    if r.interrupted {
        let _ = writeln!(w, "Interrupted:            yes (partial results)");
    }
    if let Some(reason) = &r.ended_early {
        let _ = writeln!(w, "Ended early:            {reason}");
    }
    let _ = writeln!(w, "Time taken for tests:   {:.3} seconds", r.duration_s);
    let _ = writeln!(w, "Complete requests:      {}", r.requests.completed);
    let _ = writeln!(w, "Failed requests:        {}", r.requests.failed);
    if r.requests.failed > 0 {
        let parts: Vec<String> =
            r.requests.errors.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(w, "   ({})", parts.join(", "));
    }
    let codes: Vec<String> = r.status.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let _ =
        writeln!(w, "Status codes:           {}", if codes.is_empty() { "none".to_string() } else { codes.join(", ") });
    let _ = writeln!(w, "Total transferred:      {} bytes", r.bytes.total);
    let _ = writeln!(w, "Body transferred:       {} bytes", r.bytes.body);
    if let Some(decoded) = r.bytes.decoded_body {
        let _ = writeln!(w, "Decoded body:           {decoded} bytes");
    }
    let _ = writeln!(w, "Requests per second:    {:.2} [#/sec] (mean)", r.rps);
    let rate = if r.duration_s > 0.0 { r.bytes.total as f64 / 1024.0 / r.duration_s } else { 0.0 };
    let _ = writeln!(w, "Transfer rate:          {rate:.2} [Kbytes/sec] received");
    let _ = writeln!(w, "Connections opened:     {}", r.connections_opened);
    let (k, per) = (&r.connections, &r.connections.requests_per_slot);
    let _ = writeln!(
        w,
        "Requests per client:    min {} / p1 {} / median {} / max {} over {} clients, {} idle",
        per.min, per.p1, per.median, per.max, k.slots, k.idle_slots
    );
    let _ = writeln!(
        w,
        "Longest wait (ms):      median {:.3}, max {:.3} (per client)",
        ms(k.longest_wait_us.median as f64),
        ms(k.longest_wait_us.max as f64)
    );
    if r.in_flight.count > 0 {
        let f = &r.in_flight;
        let _ = writeln!(
            w,
            "In flight at end:       {} (age median {:.3} ms, max {:.3} ms; {} older than the run)",
            f.count,
            ms(f.age_us_median as f64),
            ms(f.age_us_max as f64),
            f.older_than_run
        );
    }
    if let (Some(protocol), Some(cipher)) = (&r.tls.protocol, &r.tls.cipher) {
        let _ = writeln!(
            w,
            "TLS:                    {protocol} {cipher}, {} handshakes, {} resumed",
            r.tls.handshakes.unwrap_or(0),
            r.tls.resumed.unwrap_or(0)
        );
    }
    let _ = writeln!(w, "\nConnection Times (ms)");
    let _ = writeln!(w, "              min   mean[+/-sd]  median     max");
    let mut rows =
        vec![("Connect:", &r.connect_us), ("TLS:", &r.tls_us), ("TTFB:", &r.ttfb_us), ("Total:", &r.latency_us)];
    if c.rate.is_some() {
        rows.push(("Uncorrected:", &r.latency_uncorrected_us));
    }
    for (name, s) in rows {
        let _ = writeln!(w, "{}", row(name, s));
    }
    let _ = writeln!(w, "\nPercentage of the requests served within a certain time (ms)");
    for p in &r.latency_percentiles_us {
        let note = if p.percentile >= 100.0 { " (longest request)" } else { "" };
        let _ = writeln!(w, " {:>5}%  {:>9.3}{note}", trim(p.percentile), ms(p.value as f64));
    }
    out
}

fn row(name: &str, s: &Stats) -> String {
    format!(
        "{name:<12}{:>7.2} {:>7.2} {:>6.2} {:>7.2} {:>8.2}",
        ms(s.min as f64),
        ms(s.mean),
        ms(s.stdev),
        ms(s.p50 as f64),
        ms(s.max as f64)
    )
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

fn trim(p: f64) -> String {
    if p.fract() == 0.0 { format!("{p:.0}") } else { format!("{p}") }
}
