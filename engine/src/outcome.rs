//! How a finished run maps to the process's exit status. The report prints
//! whatever the outcome; the status lets a script tell the cases apart.

use crate::report::Report;

/// The run did what was asked.
pub const EXIT_OK: u8 = 0;
/// Bad arguments or a setup error (nothing was run).
pub const EXIT_USAGE: u8 = 2;
/// No request completed.
pub const EXIT_NOTHING_COMPLETED: u8 = 3;
/// The share of failed requests exceeded `--max-error-rate`.
pub const EXIT_TOO_MANY_ERRORS: u8 = 4;
/// Ended by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Ok,
    Interrupted,
    NothingCompleted,
    /// The failed share of measured requests, above the limit.
    TooManyErrors {
        share: f64,
        limit: f64,
    },
}

impl Outcome {
    /// The outcome of a report.
    pub fn of(report: &Report, max_error_rate: Option<f64>) -> Outcome {
        Outcome::decide(report.interrupted, report.requests.completed, report.requests.failed, max_error_rate)
    }

    /// The first that applies of: interrupted, nothing completed, too many errors, ok.
    pub fn decide(interrupted: bool, completed: u64, failed: u64, max_error_rate: Option<f64>) -> Outcome {
        if interrupted {
            return Outcome::Interrupted;
        }
        if completed == 0 {
            return Outcome::NothingCompleted;
        }
        let share = failed as f64 / (completed + failed) as f64;
        match max_error_rate {
            Some(limit) if share > limit => Outcome::TooManyErrors { share, limit },
            _ => Outcome::Ok,
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Ok => EXIT_OK,
            Outcome::Interrupted => EXIT_INTERRUPTED,
            Outcome::NothingCompleted => EXIT_NOTHING_COMPLETED,
            Outcome::TooManyErrors { .. } => EXIT_TOO_MANY_ERRORS,
        }
    }

    /// One line for stderr when the status is not 0 for an obvious reason.
    pub fn message(self) -> Option<String> {
        match self {
            Outcome::Ok | Outcome::Interrupted => None,
            Outcome::NothingCompleted => Some("no request completed".to_string()),
            Outcome::TooManyErrors { share, limit } => {
                Some(format!("{:.2}% of requests failed, more than --max-error-rate {limit}", share * 100.0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_table() {
        let table = [
            // interrupted, completed, failed, --max-error-rate, exit code
            (false, 10, 0, None, EXIT_OK),
            (false, 10, 90, None, EXIT_OK),      // errors are not checked unless asked
            (false, 90, 10, Some(0.1), EXIT_OK), // exactly at the limit
            (false, 89, 11, Some(0.1), EXIT_TOO_MANY_ERRORS),
            (false, 1, 0, Some(0.0), EXIT_OK),
            (false, 0, 0, None, EXIT_NOTHING_COMPLETED),
            (false, 0, 30, Some(1.0), EXIT_NOTHING_COMPLETED),
            (true, 0, 0, None, EXIT_INTERRUPTED),
            (true, 5, 95, Some(0.01), EXIT_INTERRUPTED),
        ];
        for (interrupted, completed, failed, limit, code) in table {
            let outcome = Outcome::decide(interrupted, completed, failed, limit);
            assert_eq!(outcome.exit_code(), code, "{interrupted} {completed} {failed} {limit:?}");
            assert_eq!(outcome.message().is_some(), ![EXIT_OK, EXIT_INTERRUPTED].contains(&code));
        }
    }
}
