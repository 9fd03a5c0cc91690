//! URLs and the one host:port a run talks to.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use crate::error::SetupError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// An absolute http(s) URL, split into what a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub text: String,
    pub scheme: Scheme,
    /// Host without brackets (an IPv6 literal is bare here).
    pub host: String,
    pub port: u16,
    /// Path and query, always starting with `/`.
    pub path: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, String> {
        let (scheme, rest) = text.split_once("://").ok_or("not an absolute URL (expected http://host/path)")?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(format!("unsupported scheme '{other}' (use http or https)")),
        };
        let rest = rest.split('#').next().unwrap_or("");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.contains('@') {
            return Err("user information in URLs is not supported".to_string());
        }
        let default_port = if scheme == Scheme::Http { 80 } else { 443 };
        let (host, port) = split_host_port(authority, default_port)?;
        if host.contains(|c: char| c.is_ascii_whitespace() || c.is_control()) {
            return Err("host contains whitespace or control characters".to_string());
        }
        if path.contains(|c: char| c.is_ascii_whitespace() || c.is_ascii_control()) {
            return Err("path contains whitespace or control characters".to_string());
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Url { text: text.to_string(), scheme, host, port, path })
    }

    /// The value of the Host header.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default_port = if self.scheme == Scheme::Http { 80 } else { 443 };
        if self.port == default_port { host } else { format!("{host}:{}", self.port) }
    }
}

/// One URL and its weight in the random choice.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedUrl {
    pub url: Url,
    pub weight: u32,
    /// The body length varies by design (random rows, phpinfo): no length check.
    pub varies: bool,
    /// This URL's own method (a URL list line "HEAD http://…"); None: the run's `-m`.
    pub method: Option<String>,
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("unclosed '[' in host")?;
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or("junk after ']' in host")?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("missing host".to_string());
    }
    let port = match port {
        None => default_port,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or(format!("bad port '{p}'"))?,
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// The single server a run loads: its address and scheme, resolved once.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub scheme: Scheme,
    pub host: String,
}

/// Check that all URLs share scheme, host and port, resolve the host once and
/// refuse anything but loopback unless `allow_remote` — or, inside the lab's own
/// network namespace `lab_netns`, its benchmarking addresses (198.18.0.0/15).
pub fn resolve(urls: &[WeightedUrl], allow_remote: bool, lab_netns: Option<&str>) -> Result<Target, SetupError> {
    let in_lab = match lab_netns {
        Some(name) => inside_lab_netns(name)?,
        None => false,
    };
    let first = &urls.first().ok_or_else(|| SetupError::new("URL", "", "no URL given"))?.url;
    for w in &urls[1..] {
        let u = &w.url;
        if u.scheme != first.scheme || u.host != first.host || u.port != first.port {
            return Err(SetupError::new(
                "URL",
                &u.text,
                format!("all URLs must share scheme, host and port with '{}'", first.text),
            ));
        }
    }
    let addrs = addresses(first, allow_remote)?;
    // The benchmarking range exists only inside the lab's namespaces: from anywhere else
    // it is routed off the machine, so not even --allow-remote reaches it.
    let allowed = |ip: IpAddr| {
        if is_benchmarking(ip) { in_lab } else { allow_remote || is_loopback(ip) }
    };
    if let Some(remote) = addrs.iter().find(|a| !allowed(a.ip())) {
        let why = if is_benchmarking(remote.ip()) {
            "is a benchmarking address, allowed only inside the lab's namespace (--lab-netns)"
        } else {
            "is not a loopback address; pass --allow-remote to load it"
        };
        return Err(SetupError::new("URL", &first.text, format!("{} {why}", remote.ip())));
    }
    let addr = pick_address(&addrs).unwrap_or(addrs[0]);
    Ok(Target { addr, scheme: first.scheme, host: first.host.clone() })
}

/// The one name that may be resolved without --allow-remote: /etc/hosts gives it, not DNS.
const LOCAL_NAME: &str = "localhost";

/// The addresses of the URL's host, decided on the literal before anything is resolved:
/// an IP literal is itself; `localhost` is resolved (its addresses are still checked);
/// any other name is refused without a lookup unless `allow_remote`, because DNS may
/// point it anywhere (`127.0.0.1.nip.io` resolves to loopback, a rebinding name
/// to loopback once and elsewhere later) and the lookup itself leaves the machine.
fn addresses(url: &Url, allow_remote: bool) -> Result<Vec<SocketAddr>, SetupError> {
    if let Ok(ip) = url.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, url.port)]);
    }
    if url.host != LOCAL_NAME && !allow_remote {
        return Err(SetupError::new(
            "URL",
            &url.text,
            format!(
                "host '{}' is a name, and names other than {LOCAL_NAME} resolve through DNS: \
                 use an IP literal (127.0.0.1, [::1]) or pass --allow-remote to load it",
                url.host
            ),
        ));
    }
    let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| SetupError::new("URL", &url.text, format!("cannot resolve host: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(SetupError::new("URL", &url.text, "host resolves to no address"));
    }
    Ok(addrs)
}

/// With several addresses (e.g. `localhost` as ::1 and 127.0.0.1) use the
/// first that accepts a connection, like wrk; with one, no probe is made.
fn pick_address(addrs: &[SocketAddr]) -> Option<SocketAddr> {
    if addrs.len() > 1 {
        for addr in addrs {
            if std::net::TcpStream::connect_timeout(addr, std::time::Duration::from_millis(200)).is_ok() {
                return Some(*addr);
            }
        }
    }
    addrs.first().copied()
}

/// 198.18.0.0/15, which RFC 2544 reserves for benchmarking: the lab gives these
/// addresses only to the veth ends inside the namespaces it creates.
fn is_benchmarking(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 198 && v4.octets()[1] & 0xfe == 18,
        IpAddr::V6(_) => false,
    }
}

/// Whether this process runs inside the network namespace `name` that stacklab made
/// (named stacklab-…, bound at /run/netns/NAME by `ip netns add`): the same inode
/// as /proc/self/ns/net. Anything else is an error naming the flag.
fn inside_lab_netns(name: &str) -> Result<bool, SetupError> {
    use std::os::unix::fs::MetadataExt;
    let named = name.starts_with("stacklab-") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !named {
        return Err(SetupError::new("--lab-netns", name, "not a lab namespace (stacklab-…)"));
    }
    let here = std::fs::metadata("/proc/self/ns/net");
    let lab = std::fs::metadata(format!("/run/netns/{name}"));
    // The host's namespace, where it can be read (a sandbox may hide pid 1's): a name
    // bound to it (`ip netns attach stacklab-x 1`) is no lab namespace.
    let host = std::fs::metadata("/proc/1/ns/net");
    let is_host = |h: &std::fs::Metadata| host.as_ref().is_ok_and(|i| i.ino() == h.ino());
    match (here, lab) {
        (Ok(h), _) if is_host(&h) => {
            Err(SetupError::new("--lab-netns", name, "this process runs in the host's namespace"))
        }
        (Ok(h), Ok(l)) if h.dev() == l.dev() && h.ino() == l.ino() => Ok(true),
        (_, Err(e)) => Err(SetupError::new("--lab-netns", name, format!("no such namespace: {e}"))),
        _ => Err(SetupError::new("--lab-netns", name, "this process does not run inside it")),
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let u = Url::parse("http://127.0.0.1:8080/a/b?x=1#frag").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("127.0.0.1", 8080, "/a/b?x=1"));
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u = Url::parse("https://LOCALHOST").unwrap();
        assert_eq!((u.scheme, u.port, u.path.as_str()), (Scheme::Https, 443, "/"));
        assert_eq!(u.host_header(), "localhost");
        let u = Url::parse("http://[::1]:81?q").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("::1", 81, "/?q"));
        assert_eq!(u.host_header(), "[::1]:81");
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in
            ["ftp://x/", "localhost/", "http://", "http://h:0/", "http://h:99999/", "http://u@h/", "http://h/a b"]
        {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    fn weighted(text: &str) -> WeightedUrl {
        WeightedUrl { url: Url::parse(text).unwrap(), weight: 1, varies: false, method: None }
    }

    #[test]
    fn loopback_only_by_default() {
        assert!(resolve(&[weighted("http://127.0.0.1:9/")], false, None).is_ok());
        assert!(resolve(&[weighted("http://127.3.4.5:9/")], false, None).is_ok());
        assert!(resolve(&[weighted("http://[::1]:9/")], false, None).is_ok());
        let err = resolve(&[weighted("http://10.1.2.3:9/")], false, None).unwrap_err();
        assert!(err.reason.contains("--allow-remote"));
        assert!(resolve(&[weighted("http://10.1.2.3:9/")], true, None).is_ok());
    }

    #[test]
    fn names_are_decided_before_any_lookup() {
        // Would resolve to 127.0.0.1 through DNS: refused on the name, with no lookup
        // (the `.invalid` name below cannot resolve at all, so an error about resolving
        // would mean a lookup was tried).
        for url in ["http://127.0.0.1.nip.io:9/", "http://stacklab.invalid:9/", "http://localhost.:9/"] {
            let err = resolve(&[weighted(url)], false, None).unwrap_err();
            assert_eq!((err.flag.as_str(), err.value.as_str()), ("URL", url));
            assert!(err.reason.contains("--allow-remote") && err.reason.contains("is a name"), "{}", err.reason);
        }
        // localhost is resolved, and each of its addresses is loopback here.
        let target = resolve(&[weighted("http://LocalHost:9/")], false, None).unwrap();
        assert!(is_loopback(target.addr.ip()), "{}", target.addr);
        // IP literals are taken as they are, checked without resolving.
        assert_eq!(addresses(&Url::parse("http://[::1]:7/").unwrap(), false).unwrap(), ["[::1]:7".parse().unwrap()]);
        let err = resolve(&[weighted("http://0x7f.1:9/")], false, None).unwrap_err();
        assert!(err.reason.contains("is a name"), "{}", err.reason);
    }

    #[test]
    fn control_characters_from_a_url_are_escaped_in_errors() {
        let text = "http://10.0.0.1:9/\x1b[2J\r";
        let err = SetupError::new("URL", text, format!("echo '{text}'"));
        let line = err.to_string();
        assert!(!line.contains(|c: char| c.is_control()), "{line:?}");
        assert!(line.contains("\\u{1b}[2J\\r"), "{line}");
        assert!(Url::parse("http://a\x1bb:9/").unwrap_err().contains("control characters"));
    }

    #[test]
    fn benchmarking_addresses_only_inside_the_labs_namespace() {
        let url = [weighted("http://198.18.0.1:9/")];
        let err = resolve(&url, false, None).unwrap_err();
        assert!(err.reason.contains("only inside the lab's namespace"), "{}", err.reason);
        assert!(is_benchmarking("198.19.255.1".parse().unwrap()));
        assert!(!is_benchmarking("198.20.0.1".parse().unwrap()));
        assert!(!is_benchmarking("198.17.0.1".parse().unwrap()));
        // Not in a namespace of that name (none exists, or this test runs outside it).
        let err = resolve(&url, false, Some("stacklab-no-such-ns")).unwrap_err();
        assert_eq!(err.flag, "--lab-netns");
        let err = resolve(&url, false, Some("../../proc/1/ns/net")).unwrap_err();
        assert!(err.reason.contains("not a lab namespace"), "{}", err.reason);
        // --allow-remote never reaches the range: from here it would leave the machine.
        let err = resolve(&url, true, None).unwrap_err();
        assert!(err.reason.contains("only inside the lab's namespace"), "{}", err.reason);
        // From the host's own namespace a lab name is refused: it names no namespace, or
        // (where /proc/1/ns/net can be read) it is the host's own.
        let err = resolve(&url, false, Some("stacklab-host-alias")).unwrap_err();
        assert_eq!(err.flag, "--lab-netns");
    }

    #[test]
    fn picks_the_address_that_listens() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let live = listener.local_addr().unwrap();
        let dead: SocketAddr = format!("[::1]:{}", live.port()).parse().unwrap();
        assert_eq!(pick_address(&[dead, live]), Some(live));
        assert_eq!(pick_address(&[dead]), Some(dead));
        assert_eq!(pick_address(&[]), None);
    }

    #[test]
    fn one_host_per_run() {
        let urls = [weighted("http://127.0.0.1:9/a"), weighted("http://127.0.0.1:9/b")];
        assert!(resolve(&urls, false, None).is_ok());
        let urls = [weighted("http://127.0.0.1:9/a"), weighted("http://127.0.0.1:10/b")];
        assert!(resolve(&urls, false, None).is_err());
    }
}
