//! The binary's contract: exit codes, one-line errors, the JSON schema.

mod common;

use common::{Behavior, run, run_json, run_json_exit, start};

#[test]
fn bad_arguments_exit_2_with_one_line_naming_the_flag() {
    let table: &[(&[&str], &str)] = &[
        (&["ftp://127.0.0.1/"], "URL"),
        (&["http//nohost"], "URL"),
        (&["-n", "5", "-d", "1s", "http://127.0.0.1:1/"], "--requests"),
        (&["--rate", "0", "http://127.0.0.1:1/"], "--rate"),
        (&["-H", "NoColon", "http://127.0.0.1:1/"], "--header"),
        (&["-c", "0", "http://127.0.0.1:1/"], "--connections"),
        (&["--frobnicate", "http://127.0.0.1:1/"], "--frobnicate"),
        (&["--urls", "/nonexistent/list", "-n", "1"], "--urls"),
        (&["--body", "/nonexistent/body", "http://127.0.0.1:1/"], "--body"),
        (&["http://127.0.0.1:1/a", "http://localhost:2/b"], "URL"),
        (&["-n", "1", "http://192.0.2.1/"], "--allow-remote"),
        (&["--segment", "3/3", "http://127.0.0.1:1/"], "--segment"),
        (&["--segment", "0/1025", "http://127.0.0.1:1/"], "--segment"),
        (&["--start-at", "tomorrow", "http://127.0.0.1:1/"], "--start-at"),
        (&["--start-at", "99999999999.5", "http://127.0.0.1:1/"], "--start-at"),
        (&["--raw-log", "/nonexistent/raw", "-n", "1", "http://127.0.0.1:1/"], "--raw-log"),
        (&["--report-file", "/nonexistent/report", "-n", "1", "http://127.0.0.1:1/"], "--report-file"),
    ];
    for (args, flag) in table {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_and_version_exit_0() {
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in
        ["Exit status", "  3 ", "  4 ", "  130 ", "--max-error-rate", "--segment", "--start-at", "--report-file"]
    {
        assert!(text.contains(needle), "--help lacks {needle:?}:\n{text}");
    }
    assert!(!text.contains("--raw-log"), "a test-only option stays out of --help");
    let v = run(&["--version"]);
    assert!(String::from_utf8_lossy(&v.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn json_report_matches_the_schema() {
    let schema_text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/report.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let server = start(Behavior::Length(600));
    let refused = format!("http://127.0.0.1:{}/", common::closed_port());
    let base = std::env::temp_dir().join(format!("stacklab-load-schema-{}", std::process::id()));
    let (urls, schedule) =
        (base.with_extension("urls").display().to_string(), base.with_extension("schedule").display().to_string());
    std::fs::write(&urls, format!("GET {}\nHEAD {} 0\n", server.url("/"), server.url("/h"))).unwrap();
    std::fs::write(&schedule, "0 0\n1000 0\n2000 0\n").unwrap();
    for (args, code) in [
        (vec!["-c", "4", "-n", "500", "-H", "X-Test: 1", &server.url("/")], 0),
        (vec!["-c", "2", "-d", "1s", "--rate", "200", "--warmup", "200ms", &server.url("/")], 0),
        (vec!["-n", "5", &refused], 3),
        (vec!["-c", "2", "-d", "5s", &refused], 3), // ends early: the optional key
        (vec!["-c", "2", "--urls", &urls, "--schedule", &schedule], 0),
        (vec!["-c", "2", "-n", "50", "--segment", "1/3", "--start-at", "1", "--rate", "1000", &server.url("/")], 0),
    ] {
        let report = run_json_exit(&args, code);
        let errors: Vec<String> =
            validator.iter_errors(&report).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
        assert_eq!(report["schema_version"], 5);
    }
    for file in [&urls, &schedule] {
        std::fs::remove_file(file).unwrap(); // nothing left behind in the temporary directory
    }
}

#[test]
fn exit_status_says_how_the_run_went() {
    // Bodies of 10 and 20 bytes alternate: half the responses are length mismatches.
    let server = start(Behavior::Alternate(10, 20));
    let r = run_json_exit(&["-c", "1", "-n", "10", "--max-error-rate", "0.4", &server.url("/")], 4);
    assert_eq!((r["requests"]["failed"].as_u64(), r["config"]["max_error_rate"].as_f64()), (Some(5), Some(0.4)));
    let r = run_json_exit(&["-c", "1", "-n", "10", "--max-error-rate", "0.5", &server.url("/")], 0);
    assert_eq!(r["requests"]["failed"], 5);
    run_json_exit(&["-c", "1", "-n", "10", &server.url("/")], 0); // not checked unless asked
    let refused = format!("http://127.0.0.1:{}/", common::closed_port());
    let out = run(&["-n", "3", &refused]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Complete requests:      0"), "the report still prints");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no request completed"));
}

#[test]
fn the_report_file_holds_the_report_when_the_engine_exits() {
    let server = start(Behavior::Length(100));
    let path = std::env::temp_dir().join(format!("stacklab-load-report-file-{}", std::process::id()));
    let shown = path.display().to_string();
    // a room reserved beforehand, zeros longer than the report: written over, cut to it
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let out = run(&["--json", "-c", "2", "-n", "50", "--report-file", &shown, &server.url("/")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(written, printed);
    // JSON whatever is printed; a run that completed nothing has its report there too
    let refused = format!("http://127.0.0.1:{}/", common::closed_port());
    let out = run(&["-n", "3", "--report-file", &shown, &refused]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Complete requests:      0"));
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!((written["requests"]["completed"].as_u64(), written["schema_version"].as_u64()), (Some(0), Some(5)));
    std::fs::remove_file(&path).unwrap();
    // a file that cannot be opened: refused before anything is sent
    let out = run(&["-n", "3", "--report-file", &format!("{shown}/none"), &server.url("/")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: --report-file"));
    let requests = server.seen.requests.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(requests, 50, "only the first run's requests");
}

#[test]
fn histograms_of_two_runs_merge_exactly() {
    let server = start(Behavior::Length(100));
    let a = run_json(&["-c", "2", "-n", "300", &server.url("/")]);
    let b = run_json(&["-c", "2", "-n", "500", &server.url("/")]);
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(a["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(bytes[..4], 0x1c84_9314u32.to_be_bytes(), "the standard compressed V2 cookie");
    let ha = stacklab_load::report::deserialize_histogram(a["histogram"].as_str().unwrap()).unwrap();
    let hb = stacklab_load::report::deserialize_histogram(b["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(ha.len(), 300);
    assert_eq!(ha.value_at_quantile(0.99), a["latency_us"]["p99"].as_u64().unwrap());
    let mut merged = ha.clone();
    merged.add(&hb).unwrap();
    assert_eq!(merged.len(), 800);
    assert_eq!(merged.max(), a["latency_us"]["max"].as_u64().unwrap().max(b["latency_us"]["max"].as_u64().unwrap()));
}

#[test]
fn human_summary_has_the_tables() {
    let server = start(Behavior::Length(100));
    let out = run(&["-c", "2", "-n", "100", &server.url("/")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Complete requests:      100",
        "Requests per second:",
        "Connection Times (ms)",
        "Connect:",
        "TTFB:",
        "Total:",
        "99.9%",
        "(longest request)",
        "Status codes:           200: 100",
        "Requests per client:    min ",
        "over 2 clients, 0 idle",
        "Longest wait (ms):",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}
