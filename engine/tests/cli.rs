//! The binary's contract: exit codes, one-line errors, the JSON schema.

mod common;

use common::{Behavior, run, run_json, start};

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
    assert_eq!(run(&["--help"]).status.code(), Some(0));
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
    for args in [
        vec!["-c", "4", "-n", "500", "-H", "X-Test: 1", &server.url("/")],
        vec!["-c", "2", "-d", "1s", "--rate", "200", "--warmup", "200ms", &server.url("/")],
        vec!["-n", "5", &refused],
    ] {
        let report = run_json(&args);
        let errors: Vec<String> =
            validator.iter_errors(&report).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
        assert_eq!(report["schema_version"], 1);
    }
}

#[test]
fn histograms_of_two_runs_merge_exactly() {
    let server = start(Behavior::Length(100));
    let a = run_json(&["-c", "2", "-n", "300", &server.url("/")]);
    let b = run_json(&["-c", "2", "-n", "500", &server.url("/")]);
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
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}
