//! Several processes as the agents of one load (`--segment`, `--start-at`): together they
//! send the one-agent schedule, start on the agreed instant, and their reports merge
//! exactly (the test-only `--raw-log` holds every value each histogram holds).

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use common::{Behavior, run, start};
use hdrhistogram::Histogram;
use stacklab_load::record::new_latency_histogram;
use stacklab_load::report::deserialize_histogram;

const AGENTS: usize = 3;
const RATE: f64 = 300.0;

fn unix_us(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as u64
}

/// (intended µs, latency µs) per line of a raw log.
fn read_raw_log(path: &std::path::Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| {
            let (a, b) = line.split_once(' ').expect("two numbers");
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

fn rebuild(lines: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = new_latency_histogram();
    for &(_, latency) in lines {
        h.record(latency).unwrap();
    }
    h
}

#[test]
fn three_agents_send_the_one_agent_schedule_from_one_instant_and_merge_exactly() {
    let server = start(Behavior::Length(100));
    let url = server.url("/");
    let dir = std::env::temp_dir().join(format!("stacklab-load-agents-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let asked = SystemTime::now() + Duration::from_millis(500);
    let at = format!("{}.{:06}", unix_us(asked) / 1_000_000, unix_us(asked) % 1_000_000);
    let logs: Vec<_> = (0..AGENTS).map(|k| dir.join(format!("raw-{k}"))).collect();
    let children: Vec<_> = (0..AGENTS)
        .map(|k| {
            let segment = format!("{k}/{AGENTS}");
            let args = ["--json", "-c", "2", "--rate", "300", "-d", "1s", "--warmup", "100ms", "--segment", &segment];
            Command::new(env!("CARGO_BIN_EXE_stacklab-load"))
                .args(args)
                .args(["--start-at", &at, "--raw-log", logs[k].to_str().unwrap(), &url])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let reports: Vec<serde_json::Value> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0));
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let mut merged = new_latency_histogram();
    let mut all_lines = Vec::new();
    for (k, report) in reports.iter().enumerate() {
        assert_eq!(report["schema_version"], 5);
        assert_eq!(report["config"]["segment"], serde_json::json!({"index": k, "of": AGENTS}));
        assert_eq!(report["config"]["rate"], RATE, "the rate of the whole load, echoed as given");
        let s = &report["start"];
        let (asked_us, zero_us, first_us) = (
            s["asked_unix_us"].as_u64().unwrap(),
            s["unix_us"].as_u64().unwrap(),
            s["first_send_unix_us"].as_u64().unwrap(),
        );
        eprintln!(
            "agent {k}: time zero {} us after the asked instant, first send {} us after zero",
            zero_us - asked_us,
            first_us - zero_us
        );
        assert_eq!(asked_us, unix_us(asked));
        assert!(asked_us <= zero_us && zero_us <= first_us, "{s}");
        assert!(zero_us - asked_us < 50_000, "started {} us late", zero_us - asked_us);
        // Its raw log holds exactly what its histogram holds, each at one of its arrivals.
        let lines = read_raw_log(&logs[k]);
        let histogram = deserialize_histogram(report["histogram"].as_str().unwrap()).unwrap();
        assert_eq!(rebuild(&lines), histogram, "agent {k}");
        assert_eq!(lines.len() as u64, report["requests"]["completed"].as_u64().unwrap());
        let arrivals: BTreeSet<u64> = (0..1000u64)
            .filter(|i| *i as usize % AGENTS == k)
            .map(|i| Duration::from_secs_f64(i as f64 / RATE).as_micros() as u64)
            .collect();
        assert!(lines.iter().all(|(intended, _)| arrivals.contains(intended)), "agent {k}: {lines:?}");
        // Reset at the end of the warm-up, as the histogram: what ended before it is gone.
        assert!(lines.iter().all(|&(intended, latency)| intended + latency >= 99_999), "warm-up values are not logged");
        merged.add(&histogram).unwrap();
        all_lines.extend(lines);
        for name in ["ttfb", "connect"] {
            let h = deserialize_histogram(report["histograms"][name].as_str().unwrap()).unwrap();
            let stats = if name == "ttfb" { &report["ttfb_us"] } else { &report["connect_us"] };
            assert_eq!(h.len(), stats["count"].as_u64().unwrap(), "{name}");
        }
    }
    assert_eq!(rebuild(&all_lines), merged, "the union of the logs is the merged histogram");
    // Together: every arrival of the measured second of a 300 req/s load, each sent once.
    let intended: BTreeSet<u64> = all_lines.iter().map(|l| l.0).collect();
    assert_eq!(intended.len(), all_lines.len(), "no arrival sent twice");
    assert!(all_lines.len() >= 250, "{} of about 300", all_lines.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_agents_the_report_says_so() {
    let server = start(Behavior::Length(100));
    let out = run(&["--json", "-c", "2", "-n", "20", &server.url("/")]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["config"]["segment"].is_null() && report["start"]["asked_unix_us"].is_null());
    let s = &report["start"];
    assert!(s["unix_us"].as_u64().unwrap() <= s["first_send_unix_us"].as_u64().unwrap());
    // A closed loop of -n 20 split over segments is the caller's business: each counts its own.
    let r = run(&["--json", "-c", "2", "-n", "20", "--segment", "1/4", &server.url("/")]);
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(report["requests"]["completed"], 20);
}

#[test]
fn a_segment_of_a_replay_plays_its_entries_at_their_offsets() {
    let server = start(Behavior::Length(100));
    let dir = std::env::temp_dir().join(format!("stacklab-load-agents-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (schedule, log) = (dir.join("schedule"), dir.join("raw"));
    let offsets: Vec<u64> = (0..10).map(|e| e * 7_000 + e % 3).collect();
    std::fs::write(&schedule, offsets.iter().map(|o| format!("{o} 0\n")).collect::<String>()).unwrap();
    let out = run(&[
        "--json",
        "-c",
        "2",
        "--schedule",
        schedule.to_str().unwrap(),
        "--segment",
        "2/4",
        "--raw-log",
        log.to_str().unwrap(),
        &server.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["config"]["schedule"]["requests"], 2);
    let intended: Vec<u64> = read_raw_log(&log).iter().map(|l| l.0).collect();
    assert_eq!(intended, [offsets[2], offsets[6]]);
    std::fs::remove_dir_all(&dir).unwrap();
}
