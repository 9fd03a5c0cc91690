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
        // One line, whatever the reason contains.
        let reason = self.reason.replace('\n', " ");
        write!(f, "{} '{}': {}", self.flag, self.value, reason)
    }
}

impl std::error::Error for SetupError {}
