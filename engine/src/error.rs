//! Setup errors: everything that stops a run before it starts.
//!
//! Per-request failures are not errors here; they are counted data
//! (see [`crate::record::ErrorClass`]).

use std::fmt;

/// A setup error names the flag (or argument) at fault, its value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError {
    pub flag: String,
    pub value: String,
    pub reason: String,
}

impl SetupError {
    pub fn new(flag: &str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        SetupError { flag: flag.to_string(), value: value.into(), reason: reason.into() }
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the value and reason contain: a URL or a file's line echoed
        // here could otherwise move the cursor, clear the screen or forge a second line.
        write!(f, "{} '{}': {}", self.flag, escape_controls(&self.value), escape_controls(&self.reason))
    }
}

/// `text` with each control character written as its Rust escape (`\n`, `\u{1b}`).
pub fn escape_controls(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

impl std::error::Error for SetupError {}
