//! Reading the binary's inputs within bounds, and writing its one-line reports.

use std::io::{Read, Write};

/// Largest scenario read (the reference's 1000-vertex benchmark scenario is 9 MB).
pub(crate) const MAX_SCENARIO_BYTES: u64 = 64 * 1024 * 1024;

/// Reads at most `limit` bytes of UTF-8 text from `reader`; more is an error naming the limit.
fn read_text_limited(reader: impl Read, limit: u64) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(std::io::Error::other(format!("larger than the limit of {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads the file at `path`, at most `limit` bytes (a `/dev/zero` or a huge file is an error, not
/// an out-of-memory abort).
pub(crate) fn read_limited(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    read_text_limited(std::fs::File::open(path)?, limit)
}

/// Reads the scenario text from a path or stdin.
pub(crate) fn read_input(source: &str) -> Result<String, String> {
    if source == "-" {
        read_text_limited(std::io::stdin().lock(), MAX_SCENARIO_BYTES)
            .map_err(|e| format!("cannot read standard input: {e}"))
    } else {
        read_limited(std::path::Path::new(source), MAX_SCENARIO_BYTES).map_err(|e| format!("cannot read {source}: {e}"))
    }
}

/// Writes one line to stderr, ignoring a closed pipe: `eprintln!` panics when stderr is gone, and a
/// panic whose report panics too aborts the process (SIGABRT) instead of exiting with a code.
pub(crate) fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{message}");
}
