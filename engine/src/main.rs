//! `stacklab-load [OPTIONS] URL...`: parse, run, report, exit status.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stacklab_load::error::escape_controls;
use stacklab_load::outcome::EXIT_USAGE;
use stacklab_load::{Outcome, cli, report};

fn main() -> ExitCode {
    let options = match cli::parse(std::env::args_os()) {
        Ok(options) => options,
        Err(cli::Exit::Info(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(cli::Exit::Usage(line)) => {
            eprintln!("{line}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Opened before the run: a path that cannot be written is refused with nothing run.
    let report_file = match options.report_file.as_deref().map(report::ReportFile::open).transpose() {
        Ok(file) => file,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Ctrl-C, SIGTERM and SIGHUP end the run early; the report of what was measured still prints.
    let interrupt = Arc::new(AtomicBool::new(false));
    // No "second signal kills" shortcut: tools like timeout(1) deliver the
    // same signal twice (to the child and to its group), and the report must
    // still print. Workers see the flag within 50 ms.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupt));
    }
    match stacklab_load::run(&options, &interrupt) {
        Ok(report) => {
            // In its file first: whoever waits for this process may be gone once it exits.
            if let Some(file) = report_file {
                let shown = file.path().display().to_string();
                if let Err(e) = file.write(&report) {
                    eprintln!("stacklab-load: --report-file {}: {e}", escape_controls(&shown));
                }
            }
            report::print(&report, options.output);
            let outcome = Outcome::of(&report, options.max_error_rate);
            if let Some(line) = outcome.message() {
                eprintln!("stacklab-load: {line}");
            }
            ExitCode::from(outcome.exit_code())
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
