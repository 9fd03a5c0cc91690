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
    let measurement = load::run(options, interrupt)?;
    Ok(Report::new(options, &measurement))
}
