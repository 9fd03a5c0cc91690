//! stacklab-load: the HTTP load engine of stacklab.
//!
//! Library first: [`cli::parse`] turns arguments into [`Options`],
//! [`run`] measures, [`report`] renders. Closed loop (like ab/wrk) and open
//! loop (like wrk2, coordinated-omission correct) share one worker loop.

pub mod cli;
pub mod error;
pub mod http;
pub mod load;
pub mod options;
pub mod outcome;
pub mod pick;
pub mod record;
pub mod report;
pub mod schedule;
pub mod target;

use std::sync::atomic::AtomicBool;

pub use error::SetupError;
pub use options::Options;
pub use outcome::Outcome;
pub use report::Report;

/// Run a load test and build its report.
pub fn run(options: &Options, interrupt: &AtomicBool) -> Result<Report, SetupError> {
    let raw_log_error = |e: std::io::Error| {
        let shown = options.raw_log.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        SetupError::new("--raw-log", shown, e.to_string())
    };
    // Created before the run, so that a bad path is refused with nothing run.
    let raw_log = options.raw_log.as_ref().map(std::fs::File::create).transpose().map_err(raw_log_error)?;
    let measurement = load::run(options, interrupt)?;
    if let (Some(file), Some(raw)) = (raw_log, &measurement.recorder.raw) {
        raw.write_to(file).map_err(raw_log_error)?;
    }
    Ok(Report::new(options, &measurement))
}
