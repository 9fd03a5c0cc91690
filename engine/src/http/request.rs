//! Request bytes, built once per URL before the run.

use crate::options::Options;
use crate::target::Url;

/// The complete request (head and body) for one URL, with the run's method.
pub fn build_request(url: &Url, options: &Options) -> Vec<u8> {
    build_request_as(&options.method, url, options)
}

/// The complete request (head and body) for one URL with this method (a URL list line's
/// own, `HEAD http://…`).
pub fn build_request_as(method: &str, url: &Url, options: &Options) -> Vec<u8> {
    let has = |name: &str| options.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {} HTTP/1.1\r\n", url.path);
    if !has("host") {
        head += &format!("Host: {}\r\n", url.host_header());
    }
    if !has("user-agent") {
        head += &format!("User-Agent: stacklab-load/{}\r\n", env!("CARGO_PKG_VERSION"));
    }
    if !has("accept") {
        head += "Accept: */*\r\n";
    }
    if options.compressed && !has("accept-encoding") {
        head += "Accept-Encoding: gzip, deflate\r\n";
    }
    if !options.keepalive && !has("connection") {
        head += "Connection: close\r\n";
    }
    for (name, value) in &options.headers {
        head += &format!("{name}: {value}\r\n");
    }
    if let Some(body) = &options.body
        && !has("content-length")
    {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "\r\n";
    let mut bytes = head.into_bytes();
    if let Some(body) = &options.body {
        bytes.extend_from_slice(body);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_requests() {
        let url = Url::parse("http://127.0.0.1:8080/x?y").unwrap();
        let mut o = Options::for_url(url.clone());
        o.keepalive = false;
        o.compressed = true;
        o.method = "POST".into();
        o.headers = vec![("X-Test".into(), "1".into()), ("Accept".into(), "text/html".into())];
        o.body = Some(b"hello".to_vec());
        let text = String::from_utf8(build_request(&url, &o)).unwrap();
        assert!(text.starts_with("POST /x?y HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        for line in
            ["Connection: close\r\n", "Accept-Encoding: gzip, deflate\r\n", "X-Test: 1\r\n", "Content-Length: 5\r\n"]
        {
            assert!(text.contains(line), "{line}");
        }
        assert!(!text.contains("Accept: */*"));
        assert!(text.ends_with("\r\n\r\nhello"));
    }
}
