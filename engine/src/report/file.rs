//! `--report-file FILE`: the JSON report written into a file and synced before the process
//! exits, so that a caller stopped the moment the engine exits (a kill -9) finds it whole.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{Report, render_json};
use crate::error::SetupError;

/// The report's file, opened before the run (a path that cannot be written is refused
/// with nothing run). The report is written over the file from its start, the file cut to
/// its length and synced: in a zero-filled file (room reserved beforehand, as stacklab's
/// journal gives it) the report takes the room's blocks, whatever the disk has left by
/// then, and until the write is whole the file holds no JSON document.
#[derive(Debug)]
pub struct ReportFile {
    file: File,
    path: PathBuf,
}

impl ReportFile {
    pub fn open(path: &Path) -> Result<ReportFile, SetupError> {
        let refused = |e: io::Error| SetupError::new("--report-file", path.display().to_string(), e.to_string());
        let file = OpenOptions::new().write(true).create(true).truncate(false).open(path).map_err(refused)?;
        sync_directory(path).map_err(refused)?; // its name, should it have been made now
        Ok(ReportFile { file, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The report as `--json` prints it, synced to the disk before this returns.
    pub fn write(mut self, report: &Report) -> io::Result<()> {
        let text = render_json(report) + "\n";
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(text.as_bytes())?;
        self.file.set_len(text.len() as u64)?;
        self.file.sync_all()
    }
}

fn sync_directory(path: &Path) -> io::Result<()> {
    let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(directory)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_cannot_be_written_is_refused_naming_the_flag() {
        let e = ReportFile::open(Path::new("/nonexistent/report.json")).unwrap_err();
        assert_eq!((e.flag.as_str(), e.value.as_str()), ("--report-file", "/nonexistent/report.json"));
    }
}
