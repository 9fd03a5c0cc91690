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

/// One URL's HTTP/2 request: pseudo-headers from the URL, the same headers as HTTP/1.1
/// but those HTTP/2 forbids (Host becomes :authority; Connection and its kind are gone).
pub fn build_h2_request(method: &str, url: &Url, options: &Options) -> Result<http::Request<()>, String> {
    let has = |name: &str| options.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let scheme = if url.scheme == crate::target::Scheme::Https { "https" } else { "http" };
    let authority = options
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| url.host_header(), |(_, v)| v.clone());
    let mut builder = http::Request::builder()
        .method(method)
        .uri(format!("{scheme}://{authority}{}", url.path))
        .version(http::Version::HTTP_2);
    if !has("user-agent") {
        builder = builder.header("user-agent", concat!("stacklab-load/", env!("CARGO_PKG_VERSION")));
    }
    if !has("accept") {
        builder = builder.header("accept", "*/*");
    }
    if options.compressed && !has("accept-encoding") {
        builder = builder.header("accept-encoding", "gzip, deflate");
    }
    const HOP_BY_HOP: [&str; 6] =
        ["host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];
    for (name, value) in &options.headers {
        if !HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            builder = builder.header(name.to_ascii_lowercase(), value);
        }
    }
    builder.body(()).map_err(|e| e.to_string())
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

    #[test]
    fn builds_h2_requests_without_connection_headers() {
        let url = Url::parse("https://127.0.0.1:8443/x?y").unwrap();
        let mut o = Options::for_url(url.clone());
        o.headers = vec![("X-Test".into(), "1".into()), ("Connection".into(), "close".into())];
        let r = build_h2_request("GET", &url, &o).unwrap();
        assert_eq!(r.uri().to_string(), "https://127.0.0.1:8443/x?y");
        assert_eq!(r.headers()["x-test"], "1");
        assert!(r.headers().get("connection").is_none() && r.headers().get("host").is_none());
    }
}
