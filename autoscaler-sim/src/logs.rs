//! Log lines captured in memory, for tests that check what was logged: the one writer the
//! workspace's tests hand to a `tracing_subscriber` fmt layer.
//!
//! ```
//! use autoscaler_sim::logs::LogBuffer;
//!
//! let logs = LogBuffer::default();
//! let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(logs.clone()).finish();
//! tracing::subscriber::with_default(subscriber, || tracing::warn!("slow answer"));
//! assert!(logs.text().contains("slow answer"));
//! ```

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What a fmt layer writes, kept in memory; its clones share one buffer, so the test keeps one
/// and hands another to the subscriber.
#[derive(Debug, Clone, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything written so far, as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// The buffer; a test that panicked while writing leaves it readable.
    fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for LogBuffer {
    type Writer = Self;

    fn make_writer(&'w self) -> Self {
        self.clone()
    }
}
