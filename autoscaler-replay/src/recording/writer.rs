//! [`Recorder`]: appends each job's recording to `DIR/<job>.jsonl`, bounded in size and rotated.

use super::{Entry, RecordedMetrics, Snapshot, entry_line, header_line};
use autoscaler_core::config::Configuration;
use autoscaler_core::record::DecisionRecord;
use autoscaler_metrics::JobTopology;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Size bound and rotation of the recordings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecorderOptions {
    /// A file is rotated before a line would take it past this many bytes (default 64 MiB).
    pub max_file_bytes: u64,
    /// Rotated files kept per job: `<job>.1.jsonl` (newest) .. `<job>.<keep>.jsonl` (default 4).
    pub keep_rotated: u32,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: 64 << 20,
            keep_rotated: 4,
        }
    }
}

/// The file name of `job`'s current recording: the key with every character outside
/// `[A-Za-z0-9._-]` replaced by `_`, then `.jsonl`.
pub fn job_file_name(job: &str) -> String {
    let safe: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = if safe.is_empty() || safe.starts_with('.') {
        format!("job{safe}")
    } else {
        safe
    };
    format!("{safe}.jsonl")
}

struct JobFile {
    file: File,
    bytes: u64,
    /// Size of the header line at the start of the current file.
    header_bytes: u64,
    config: Option<(DateTime<Utc>, Configuration)>,
    topology: Option<(DateTime<Utc>, JobTopology)>,
    /// Whether the current file already holds the config / topology above.
    wrote_config: bool,
    wrote_topology: bool,
}

/// Appends recordings, one file per job, in a directory. Safe to share between concurrent cycles.
/// Every line is written with one `write` call and flushed, so a crash loses at most the line in
/// flight (which the reader skips).
pub struct Recorder {
    dir: PathBuf,
    options: RecorderOptions,
    jobs: Mutex<HashMap<String, JobFile>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("dir", &self.dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder into `dir` (created if missing).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(dir: impl Into<PathBuf>, options: RecorderOptions) -> io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            dir,
            options,
            jobs: Mutex::new(HashMap::new()),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current file of `job`.
    pub fn path_of(&self, job: &str) -> PathBuf {
        self.dir.join(job_file_name(job))
    }

    fn rotated_path(&self, job: &str, n: u32) -> PathBuf {
        let name = job_file_name(job);
        let stem = name.trim_end_matches(".jsonl");
        self.dir.join(format!("{stem}.{n}.jsonl"))
    }

    fn open(&self, job: &str, now: DateTime<Utc>) -> io::Result<JobFile> {
        let path = self.path_of(job);
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        let mut bytes = file.metadata()?.len();
        let header = format!("{}\n", header_line(job, now));
        if bytes == 0 {
            file.write_all(header.as_bytes())?;
            bytes = header.len() as u64;
        }
        Ok(JobFile {
            file,
            bytes,
            header_bytes: header.len() as u64,
            config: None,
            topology: None,
            wrote_config: false,
            wrote_topology: false,
        })
    }

    fn rotate(&self, job: &str, jf: &mut JobFile, now: DateTime<Utc>) -> io::Result<()> {
        if self.options.keep_rotated == 0 {
            std::fs::remove_file(self.path_of(job))?;
        } else {
            for n in (1..self.options.keep_rotated).rev() {
                let from = self.rotated_path(job, n);
                if from.exists() {
                    std::fs::rename(&from, self.rotated_path(job, n + 1))?;
                }
            }
            std::fs::rename(self.path_of(job), self.rotated_path(job, 1))?;
        }
        let fresh = self.open(job, now)?;
        jf.file = fresh.file;
        jf.bytes = fresh.bytes;
        jf.header_bytes = fresh.header_bytes;
        jf.wrote_config = false;
        jf.wrote_topology = false;
        Ok(())
    }

    fn write_line(&self, job: &str, jf: &mut JobFile, line: &str, now: DateTime<Utc>) -> io::Result<()> {
        let size = line.len() as u64 + 1;
        // The header is always there; rotate only a file that holds more than its header.
        if jf.bytes + size > self.options.max_file_bytes && jf.bytes > jf.header_bytes {
            self.rotate(job, jf, now)?;
            // A fresh file repeats what the lines after it depend on.
            self.write_context(job, jf, now)?;
        }
        let mut buf = String::with_capacity(line.len() + 1);
        buf.push_str(line);
        buf.push('\n');
        jf.file.write_all(buf.as_bytes())?;
        jf.file.flush()?;
        jf.bytes += size;
        Ok(())
    }

    fn write_context(&self, job: &str, jf: &mut JobFile, now: DateTime<Utc>) -> io::Result<()> {
        if !jf.wrote_config
            && let Some((at, config)) = jf.config.clone()
        {
            jf.wrote_config = true;
            self.write_line(job, jf, &entry_line(&Entry::Config { at, config }), now)?;
        }
        if !jf.wrote_topology
            && let Some((at, topology)) = jf.topology.clone()
        {
            jf.wrote_topology = true;
            let line = entry_line(&Entry::Topology {
                at,
                topology: Box::new(topology),
            });
            self.write_line(job, jf, &line, now)?;
        }
        Ok(())
    }

    fn with_job<T>(
        &self,
        job: &str,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut JobFile) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut jobs = self
            .jobs
            .lock()
            .map_err(|_| io::Error::other("recorder lock poisoned"))?;
        if !jobs.contains_key(job) {
            let jf = self.open(job, now)?;
            jobs.insert(job.to_owned(), jf);
        }
        match jobs.get_mut(job) {
            Some(jf) => f(jf),
            None => Err(io::Error::other("job file vanished")),
        }
    }

    /// Records one collection of `job` at `at`: the configuration and topology when they changed
    /// (or the file is new), then the snapshot.
    ///
    /// # Errors
    /// I/O errors; the caller logs them (a recording never fails a cycle).
    #[allow(clippy::too_many_arguments)]
    pub fn record_collection(
        &self,
        job: &str,
        at: DateTime<Utc>,
        config: &Configuration,
        topology: &JobTopology,
        job_running_since: DateTime<Utc>,
        task_manager_cpu: Option<f64>,
        task_manager_memory: Option<u64>,
        metrics: RecordedMetrics,
    ) -> io::Result<()> {
        self.with_job(job, at, |jf| {
            if jf.config.as_ref().is_none_or(|(_, c)| c != config) {
                jf.config = Some((at, config.clone()));
                jf.wrote_config = false;
            }
            if jf.topology.as_ref().is_none_or(|(_, t)| t != topology) {
                jf.topology = Some((at, topology.clone()));
                jf.wrote_topology = false;
            }
            self.write_context(job, jf, at)?;
            let line = entry_line(&Entry::Snapshot(Box::new(Snapshot {
                at,
                job_running_since,
                task_manager_cpu,
                task_manager_memory,
                metrics,
            })));
            self.write_line(job, jf, &line, at)
        })
    }

    /// Records the decision of one cycle of `job`.
    ///
    /// # Errors
    /// I/O errors; the caller logs them.
    pub fn record_decision(&self, job: &str, record: &DecisionRecord) -> io::Result<()> {
        self.with_job(job, record.at, |jf| {
            let line = entry_line(&Entry::Decision(Box::new(record.clone())));
            self.write_line(job, jf, &line, record.at)
        })
    }

    /// Closes `job`'s file (a job that disappeared); a later record reopens it.
    pub fn forget(&self, job: &str) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.remove(job);
        }
    }
}
