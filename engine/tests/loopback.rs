//! The real binary against tiny servers on 127.0.0.1.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use common::{Behavior, chunked_response, length_response, run_json, start};

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn exactly_n_requests_and_bytes_match() {
    let server = start(Behavior::Length(1234));
    let r = run_json(&["-c", "7", "--threads", "2", "-n", "1000", &server.url("/a")]);
    assert_eq!(u(&r["requests"]["completed"]), 1000);
    assert_eq!(u(&r["requests"]["failed"]), 0);
    assert_eq!(server.seen.requests.load(SeqCst), 1000);
    assert_eq!(u(&r["bytes"]["total"]), server.seen.bytes_sent.load(SeqCst));
    assert_eq!(u(&r["bytes"]["total"]), 1000 * length_response(1234).len() as u64);
    assert_eq!(u(&r["bytes"]["body"]), 1000 * 1234);
    assert_eq!(u(&r["status"]["200"]), 1000);
    assert_eq!(u(&r["status_classes"]["2xx"]), 1000);
    assert_eq!(u(&r["latency_us"]["count"]), 1000);
    let series: u64 = r["timeseries"].as_array().unwrap().iter().map(|p| u(&p["completed"])).sum();
    assert_eq!(series, 1000);
}

#[test]
fn keepalive_reuses_connections() {
    let server = start(Behavior::Length(10));
    let r = run_json(&["-c", "4", "--threads", "2", "-n", "200", &server.url("/")]);
    assert_eq!(server.seen.connections.load(SeqCst), 4);
    assert_eq!(u(&r["connections_opened"]), 4);
    assert_eq!(u(&r["connect_us"]["count"]), 4);
}

#[test]
fn no_keepalive_opens_one_connection_per_request() {
    let server = start(Behavior::Length(10));
    let r = run_json(&["-c", "4", "-n", "200", "--no-keepalive", &server.url("/")]);
    assert_eq!(u(&r["requests"]["completed"]), 200);
    assert_eq!(server.seen.connections.load(SeqCst), 200);
    assert_eq!(u(&r["connections_opened"]), 200);
    assert_eq!(r["config"]["keepalive"], false);
}

#[test]
fn chunked_bodies_are_framed() {
    let server = start(Behavior::Chunked(1050));
    let r = run_json(&["-c", "3", "-n", "300", &server.url("/")]);
    assert_eq!(u(&r["requests"]["completed"]), 300);
    assert_eq!(u(&r["bytes"]["body"]), 300 * 1050);
    assert_eq!(u(&r["bytes"]["total"]), 300 * chunked_response(1050).len() as u64);
    assert_eq!(u(&r["requests"]["errors"]["length_mismatch"]), 0);
    assert_eq!(server.seen.connections.load(SeqCst), 3);
}

#[test]
fn server_connection_close_is_followed() {
    let server = start(Behavior::Close(50));
    let r = run_json(&["-c", "2", "-n", "100", &server.url("/")]);
    assert_eq!(u(&r["requests"]["completed"]), 100);
    assert_eq!(u(&r["requests"]["failed"]), 0);
    assert_eq!(server.seen.connections.load(SeqCst), 100);
}

#[test]
fn resets_are_counted_not_fatal() {
    let server = start(Behavior::Reset);
    let r = run_json(&["-c", "2", "-n", "50", &server.url("/")]);
    assert_eq!(u(&r["requests"]["completed"]), 0);
    assert_eq!(u(&r["requests"]["failed"]), 50);
    let e = &r["requests"]["errors"];
    assert_eq!(u(&e["read"]) + u(&e["write"]) + u(&e["connect"]), 50, "{e}");
}

#[test]
fn refused_target_is_a_completed_run() {
    let port = common::closed_port();
    let r = run_json(&["-c", "3", "-n", "30", &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(u(&r["requests"]["errors"]["connect"]), 30);
    assert_eq!(u(&r["requests"]["completed"]), 0);
    assert_eq!(u(&r["connections_opened"]), 0);
    assert_eq!(u(&r["latency_us"]["p99"]), 0);
}

#[test]
fn silent_server_times_out_and_run_ends_on_time() {
    let server = start(Behavior::Silent);
    let t0 = Instant::now();
    let r = run_json(&["-c", "3", "-d", "1500ms", "--timeout", "300ms", &server.url("/")]);
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    let timeouts = u(&r["requests"]["errors"]["timeout"]);
    assert!((9..=18).contains(&timeouts), "timeouts {timeouts}");
    assert_eq!(u(&r["requests"]["completed"]), 0);
}

#[test]
fn length_mismatch_against_first_response() {
    let server = start(Behavior::Alternate(10, 20));
    let r = run_json(&["-c", "1", "-n", "10", &server.url("/x")]);
    assert_eq!(u(&r["requests"]["errors"]["length_mismatch"]), 5);
    assert_eq!(u(&r["requests"]["completed"]), 5);
    assert_eq!(u(&r["bytes"]["body"]), 5 * 10 + 5 * 20);
}

#[test]
fn a_url_marked_varies_is_never_a_length_mismatch() {
    let server = start(Behavior::Alternate(10, 20));
    let dir = std::env::temp_dir().join(format!("stacklab-varies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("urls.txt");
    std::fs::write(&list, format!("{} 1 varies\n", server.url("/x"))).unwrap();
    let r = run_json(&["-c", "1", "-n", "10", "--urls", list.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(u(&r["requests"]["errors"]["length_mismatch"]), 0);
    assert_eq!(u(&r["requests"]["completed"]), 10);
    assert_eq!(r["config"]["urls"][0]["varies"], serde_json::json!(true));
}

#[test]
fn coordinated_omission_is_corrected() {
    // 1000 req/s for 5 s; after 1500 requests the server freezes for 1 s once.
    let server = start(Behavior::FreezeOnce { body: 100, after: 1500, pause: Duration::from_secs(1) });
    let r = run_json(&["-c", "10", "--threads", "1", "--rate", "1000", "-d", "5s", &server.url("/")]);
    let corrected = u(&r["latency_us"]["p99"]);
    let uncorrected = u(&r["latency_uncorrected_us"]["p99"]);
    assert!(corrected >= 300_000, "corrected p99 {corrected} us");
    assert!(uncorrected < corrected / 5, "uncorrected p99 {uncorrected} us vs corrected {corrected} us");
    let completed = u(&r["requests"]["completed"]);
    assert!((4000..=5100).contains(&completed), "completed {completed}");
}

#[test]
fn closed_loop_stall_does_not_inflate_counts() {
    let server = start(Behavior::FreezeOnce { body: 100, after: 200, pause: Duration::from_millis(700) });
    let r = run_json(&["-c", "4", "--threads", "1", "-d", "1500ms", &server.url("/")]);
    let completed = u(&r["requests"]["completed"]);
    assert!(completed <= server.seen.requests.load(SeqCst));
    // Closed loop: corrected and uncorrected are the same thing.
    assert_eq!(r["latency_us"], r["latency_uncorrected_us"]);
    assert!(u(&r["latency_us"]["max"]) >= 600_000);
}

#[test]
fn warmup_resets_counters() {
    let server = start(Behavior::Length(10));
    let r = run_json(&["-c", "2", "--warmup", "300ms", "-n", "100", &server.url("/")]);
    assert_eq!(u(&r["requests"]["completed"]), 100);
    assert!(server.seen.requests.load(SeqCst) > 100, "warm-up load was sent");
    assert_eq!(u(&r["connections_opened"]), 0, "connections were opened during warm-up");
}

#[test]
fn weighted_urls_are_repeatable() {
    let server = start(Behavior::Length(10));
    let dir = std::env::temp_dir().join(format!("stacklab-load-weights-{}", std::process::id()));
    std::fs::write(&dir, format!("# list\n{} 3\n{} 1\n", server.url("/a"), server.url("/b"))).unwrap();
    let a = run_json(&["-c", "1", "-n", "50", "--seed", "9", "--urls", dir.to_str().unwrap()]);
    let b = run_json(&["-c", "1", "-n", "50", "--seed", "9", "--urls", dir.to_str().unwrap()]);
    assert_eq!(a["config"]["urls"], b["config"]["urls"]);
    assert_eq!(a["config"]["urls"][0]["weight"], 3);
    assert_eq!(a["config"]["seed"], 9);
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn sigint_still_prints_the_report() {
    let server = start(Behavior::Length(10));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_stacklab-load"))
        .args(["--json", "-c", "2", "-d", "30s", &server.url("/")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child process. Twice at once, as timeout(1)
    // does (child and process group): the report must still print.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["interrupted"], true);
    assert!(u(&r["requests"]["completed"]) > 0);
    assert!(r["duration_s"].as_f64().unwrap() < 5.0);
}
