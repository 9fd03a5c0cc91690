//! A replay schedule: the intended send time of every request and its URL, played once
//! in order (open loop), as a pure table, no clock inside.
//!
//! Entries are dealt to the connections in turn (entry e goes to slot e mod slots), as
//! the constant-rate pacer spreads its sends: a slot busy with a slow response delays
//! only its own next entries, and their latency still counts from their intended time.

use std::time::Duration;

use crate::options::Segment;

/// One request of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// When it should go, from the start of the run.
    pub at: Duration,
    /// Index into the run's URL list.
    pub url: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    entries: Vec<Entry>,
}

impl Schedule {
    /// Parse "OFFSET_US URL_INDEX" per line (microseconds from the start, the 0-based
    /// line of the URL list), `#` comments; offsets never go back. Errors name the line.
    pub fn parse(text: &str, urls: usize) -> Result<Schedule, String> {
        let mut entries = Vec::new();
        let mut last = Duration::ZERO;
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}", i + 1);
            let mut parts = line.split_whitespace();
            let (Some(at), Some(url), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(bad("expected 'OFFSET_US URL_INDEX'"));
            };
            let at = Duration::from_micros(at.parse().map_err(|_| bad(&format!("bad offset '{at}'")))?);
            let url: usize = url.parse().map_err(|_| bad(&format!("bad URL index '{url}'")))?;
            if url >= urls {
                return Err(bad(&format!("URL index {url} but the URL list has {urls}")));
            }
            if at < last {
                return Err(bad("offset earlier than the line before (a schedule plays in order)"));
            }
            last = at;
            entries.push(Entry { at, url });
        }
        if entries.is_empty() {
            return Err("no entries in file".to_string());
        }
        Ok(Schedule { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries of 0-based index i ≡ K (mod N) of segment K/N, at their own offsets:
    /// the N segments together play every entry once.
    pub fn segment(&self, segment: Segment) -> Schedule {
        let entries = self.entries.iter().skip(segment.index).step_by(segment.of.max(1)).copied().collect();
        Schedule { entries }
    }

    /// From the first entry's offset to the last's.
    pub fn span(&self) -> Duration {
        match (self.entries.first(), self.entries.last()) {
            (Some(a), Some(b)) => b.at - a.at,
            _ => Duration::ZERO,
        }
    }

    /// The `sent`-th request of slot `slot` of `slots`, or None when that slot is done.
    pub fn entry(&self, slot: usize, slots: usize, sent: u64) -> Option<Entry> {
        let index = usize::try_from(sent).ok()?.checked_mul(slots)?.checked_add(slot)?;
        self.entries.get(index).copied()
    }

    /// How many requests slot `slot` of `slots` sends in all.
    pub fn per_slot(&self, slot: usize, slots: usize) -> u64 {
        let n = self.entries.len();
        if slot >= n { 0 } else { ((n - slot).div_ceil(slots.max(1))) as u64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn parses_and_refuses_naming_the_line() {
        let s = Schedule::parse("# t url\n0 1\n1500 0\n\n1500 1 # same instant\n", 2).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.entry(0, 1, 1), Some(Entry { at: US(1500), url: 0 }));
        assert_eq!(s.span(), US(1500));
        let table = [
            ("0 2\n", "line 1: URL index 2"),
            ("5 0\n3 0\n", "line 2: offset earlier"),
            ("x 0\n", "bad offset"),
            ("1 -1\n", "bad URL index"),
            ("1\n", "expected"),
            ("1 0 7\n", "expected"),
            ("# none\n", "no entries"),
        ];
        for (text, want) in table {
            let err = Schedule::parse(text, 2).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn entries_dealt_to_slots_in_turn() {
        let text: String = (0..7).map(|k| format!("{} {}\n", k * 10, k % 2)).collect();
        let s = Schedule::parse(&text, 2).unwrap();
        // 3 slots: slot 0 gets entries 0, 3, 6; slot 1 gets 1, 4; slot 2 gets 2, 5.
        assert_eq!([s.per_slot(0, 3), s.per_slot(1, 3), s.per_slot(2, 3)], [3, 2, 2]);
        assert_eq!(s.entry(0, 3, 2).map(|e| e.at), Some(US(60)));
        assert_eq!(s.entry(1, 3, 2), None);
        assert_eq!(s.entry(2, 3, 1), Some(Entry { at: US(50), url: 1 }));
        // More slots than entries: the extra ones send nothing.
        assert_eq!(s.per_slot(9, 10), 0);
        assert_eq!((0..10).map(|k| s.per_slot(k, 10)).sum::<u64>(), 7);
        // Segments: entries i ≡ K (mod N), each played by exactly one segment.
        let of = |k, n| s.segment(Segment { index: k, of: n }).entries.iter().map(|e| e.at).collect::<Vec<_>>();
        assert_eq!(of(1, 3), [US(10), US(40)]);
        assert_eq!(of(0, 1), (0..7).map(|k| US(k * 10)).collect::<Vec<_>>());
        let mut union: Vec<Duration> = (0..4).flat_map(|k| of(k, 4)).collect();
        union.sort();
        assert_eq!(union, of(0, 1));
        assert!(s.segment(Segment { index: 8, of: 9 }).is_empty());
        // Overflow rows: no panic, no entry.
        assert_eq!(s.entry(usize::MAX, usize::MAX, u64::MAX), None);
    }
}
