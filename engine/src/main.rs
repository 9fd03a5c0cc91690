//! `stacklab-load [OPTIONS] URL...`: parse, run, report.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use stacklab_load::{cli, report};

fn main() -> ExitCode {
    let options = match cli::parse(std::env::args_os()) {
        Ok(options) => options,
        Err(cli::Exit::Info(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(cli::Exit::Usage(line)) => {
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    // Ctrl-C and SIGTERM end the run early; the report of what was measured still prints.
    let interrupt = Arc::new(AtomicBool::new(false));
    // No "second signal kills" shortcut: tools like timeout(1) deliver the
    // same signal twice (to the child and to its group), and the report must
    // still print. Workers see the flag within 50 ms.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupt));
    }
    match stacklab_load::run(&options, &interrupt) {
        Ok(report) => {
            report::print(&report, options.output);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
