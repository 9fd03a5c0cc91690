//! TLS against a rustls test server with a generated self-signed certificate.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Start an HTTPS server answering every request with a 100-byte body.
fn start_tls_server() -> u16 {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = key.cert.der().clone();
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], private)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut s = rustls::StreamOwned::new(conn, tcp);
                let mut buf = Vec::new();
                loop {
                    let Some(head) = common::read_head(&mut s, &mut buf) else { return };
                    let close = head.contains("connection: close");
                    if s.write_all(&common::length_response(100)).is_err() || s.flush().is_err() {
                        return;
                    }
                    if close {
                        s.conn.send_close_notify();
                        let _ = s.flush();
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn resumption_on_resumes_most_handshakes() {
    let port = start_tls_server();
    let url = format!("https://localhost:{port}/");
    let r = common::run_json(&["--insecure", "-c", "1", "-n", "20", "--no-keepalive", &url]);
    assert_eq!(u(&r["requests"]["completed"]), 20, "{}", r["requests"]);
    assert_eq!(u(&r["tls"]["handshakes"]), 20);
    assert!(u(&r["tls"]["resumed"]) >= 15, "resumed {}", r["tls"]["resumed"]);
    assert_eq!(r["tls"]["protocol"], "TLSv1.3");
    assert!(r["tls"]["cipher"].as_str().unwrap().starts_with("TLS13_"));
    assert_eq!(u(&r["tls_us"]["count"]), 20);
    assert_eq!(u(&r["bytes"]["body"]), 2000);
}

#[test]
fn resumption_off_never_resumes() {
    let port = start_tls_server();
    let url = format!("https://127.0.0.1:{port}/");
    let r = common::run_json(&["--insecure", "--no-tls-resume", "-c", "1", "-n", "10", "--no-keepalive", &url]);
    assert_eq!(u(&r["requests"]["completed"]), 10);
    assert_eq!(u(&r["tls"]["handshakes"]), 10);
    assert_eq!(u(&r["tls"]["resumed"]), 0);
    assert_eq!(r["config"]["tls_resume"], false);
}

#[test]
fn keepalive_handshakes_once_per_connection() {
    let port = start_tls_server();
    let url = format!("https://localhost:{port}/");
    let r = common::run_json(&["--insecure", "-c", "2", "--threads", "1", "-n", "100", &url]);
    assert_eq!(u(&r["requests"]["completed"]), 100);
    assert_eq!(u(&r["tls"]["handshakes"]), 2);
}

#[test]
fn untrusted_certificate_is_a_tls_error() {
    let port = start_tls_server();
    let url = format!("https://localhost:{port}/");
    let r = common::run_json_exit(&["-c", "1", "-n", "3", &url], 3);
    assert_eq!(u(&r["requests"]["errors"]["tls"]), 3);
    assert_eq!(u(&r["requests"]["completed"]), 0);
}

#[test]
fn plain_http_has_null_tls_fields() {
    let server = common::start(common::Behavior::Length(1));
    let r = common::run_json(&["-n", "1", &server.url("/")]);
    for key in ["protocol", "cipher", "handshakes", "resumed"] {
        assert!(r["tls"][key].is_null(), "{key}");
    }
}

#[test]
fn open_loop_keeps_idle_tls_connections() {
    let port = start_tls_server();
    let url = format!("https://localhost:{port}/");
    let r = common::run_json(&["--insecure", "-c", "2", "--threads", "1", "--rate", "200", "-d", "1s", &url]);
    let completed = u(&r["requests"]["completed"]);
    assert!((150..=210).contains(&completed), "completed {completed}");
    assert_eq!(u(&r["requests"]["failed"]), 0);
    assert_eq!(u(&r["tls"]["handshakes"]), 2, "idle connections were dropped and reopened");
}
