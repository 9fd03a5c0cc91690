//! Weighted random choice of URLs, repeatable from a seed, and the URL list file.

use crate::options::{WeightedUrl, is_method};
use crate::target::Url;

/// A small, fast, seedable generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Picks an index with probability proportional to its weight.
#[derive(Debug, Clone)]
pub struct Chooser {
    cumulative: Vec<u64>,
}

impl Chooser {
    pub fn new(weights: impl IntoIterator<Item = u32>) -> Chooser {
        let mut total = 0u64;
        let cumulative = weights
            .into_iter()
            .map(|w| {
                total += u64::from(w);
                total
            })
            .collect();
        Chooser { cumulative }
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.cumulative.len() <= 1 {
            return 0;
        }
        let total = *self.cumulative.last().unwrap_or(&1);
        let x = rng.next_u64() % total.max(1);
        self.cumulative.partition_point(|&c| c <= x)
    }
}

/// Parse a URL list: one URL per line, optionally after its own method (`HEAD
/// http://…`: an upper-case token; without one, the run's `-m`), an optional integer
/// weight after whitespace, then optionally the word `varies` (the body length changes
/// by design, so it is not checked against the first response); `#` starts a comment.
/// Errors name the line.
pub fn parse_url_list(text: &str) -> Result<Vec<WeightedUrl>, String> {
    let mut urls = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace().peekable();
        let method = match parts.peek() {
            Some(first) if !first.contains("://") => {
                let m = parts.next().unwrap_or("");
                if !is_method(m) {
                    return Err(format!("line {}: bad method '{m}' (an upper-case token like HEAD)", i + 1));
                }
                Some(m.to_string())
            }
            _ => None,
        };
        let url_text = parts.next().unwrap_or("");
        let url = Url::parse(url_text).map_err(|e| format!("line {}: {e}", i + 1))?;
        let weight = match parts.next() {
            None => 1,
            Some(w) => w.parse::<u32>().map_err(|_| format!("line {}: bad weight '{w}'", i + 1))?,
        };
        let varies = match parts.next() {
            None => false,
            Some("varies") => true,
            Some(extra) => return Err(format!("line {}: unexpected '{extra}' (only 'varies')", i + 1)),
        };
        if let Some(extra) = parts.next() {
            return Err(format!("line {}: unexpected '{extra}'", i + 1));
        }
        urls.push(WeightedUrl { url, weight, varies, method });
    }
    if urls.is_empty() {
        return Err("no URLs in file".to_string());
    }
    if urls.iter().all(|u| u.weight == 0) {
        return Err("all weights are 0".to_string());
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_choice_follows_weights() {
        let chooser = Chooser::new([1, 3, 0, 6]);
        let mut rng = Rng::new(42);
        let mut counts = [0u32; 4];
        for _ in 0..100_000 {
            counts[chooser.pick(&mut rng)] += 1;
        }
        assert_eq!(counts[2], 0);
        for (got, weight) in [(counts[0], 1.0), (counts[1], 3.0), (counts[3], 6.0)] {
            let share = f64::from(got) / 100_000.0;
            assert!((share - weight / 10.0).abs() < 0.01, "{counts:?}");
        }
    }

    #[test]
    fn same_seed_same_sequence() {
        let chooser = Chooser::new([1, 1, 1]);
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50).map(|_| chooser.pick(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn url_list_file() {
        let text = "# comment\nhttp://127.0.0.1/a 3\n\n  http://127.0.0.1/b   # inline\n";
        let urls = parse_url_list(text).unwrap();
        assert_eq!(urls.len(), 2);
        assert_eq!((urls[0].url.path.as_str(), urls[0].weight), ("/a", 3));
        assert_eq!((urls[1].url.path.as_str(), urls[1].weight), ("/b", 1));
        assert!(parse_url_list("http://x/ abc").unwrap_err().contains("line 1"));
        let varied = parse_url_list("http://127.0.0.1/a 2 varies\nhttp://127.0.0.1/b\n").unwrap();
        assert_eq!((varied[0].weight, varied[0].varies, varied[1].varies), (2, true, false));
        assert!(parse_url_list("http://127.0.0.1/a 2 sometimes").unwrap_err().contains("only 'varies'"));
        assert!(parse_url_list("# nothing\n").is_err());
        assert!(parse_url_list("gopher://x/").unwrap_err().contains("line 1"));
    }

    #[test]
    fn url_list_methods() {
        let urls =
            parse_url_list("HEAD http://127.0.0.1/a 2\nhttp://127.0.0.1/b\nGET http://127.0.0.1/c 1 varies\n").unwrap();
        let methods: Vec<_> = urls.iter().map(|u| u.method.as_deref()).collect();
        assert_eq!(methods, [Some("HEAD"), None, Some("GET")]);
        assert_eq!((urls[0].weight, urls[2].varies), (2, true));
        assert!(parse_url_list("head http://127.0.0.1/a").unwrap_err().contains("bad method"));
        assert!(parse_url_list("HEAD").unwrap_err().contains("line 1"));
    }
}
