//! The worker lease cache file (`snowflake.worker.cache_file`): what lets a server restarted
//! during a database outage resume its own worker id, and only while that is provably safe.
//!
//! Every claim and renewal the database confirmed writes the lease here: worker id, owner,
//! `lease_until_ms` as the database stored it, the last tick issued, and when the file was
//! written (wall clock, and `CLOCK_BOOTTIME` with the boot id). The write is atomic: a temporary
//! file is written and fsynced, renamed over the file, and the directory fsynced. A file that
//! is unreadable, of another format, another layout or another database is ignored with a log
//! line. The file is removed *before* a lease is released at shutdown (a released lease may be
//! claimed by anyone at once, so no restart may resume it); if the removal fails, the lease is
//! not released and simply expires.
//!
//! One process uses one file: it holds an exclusive `flock` on `<file>.lock` for its lifetime,
//! so two servers configured with the same path never resume one worker id (the second runs
//! without a cache and says so).
//!
//! Why resuming is safe is stated where it is done ([`super::SnowflakeEngine`]'s `resume_from`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::snowflake::layout::BitLayout;

/// The `format` every file written by this version carries; any other is ignored.
const FORMAT: &str = "leafid-worker-lease-1";

/// One worker lease as it was last confirmed by the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedLease {
    /// `FORMAT`.
    pub format: String,
    /// The layout and database this lease belongs to (see [`WorkerCache::open`]).
    pub scope: String,
    /// The leased worker id.
    pub worker_id: u64,
    /// The owner token the row carries: renewals must present it.
    pub owner: String,
    /// The lease end (unix ms) the database confirmed.
    pub lease_until_ms: i64,
    /// The largest tick this server had issued ids from when it wrote the file; -1 for none.
    pub last_tick: i64,
    /// Wall clock (unix ms) when the file was written.
    pub written_unix_ms: i64,
    /// `CLOCK_BOOTTIME` (ms) when the file was written.
    pub written_boot_ms: i64,
    /// `/proc/sys/kernel/random/boot_id` when the file was written.
    pub boot_id: Option<String>,
}

/// Why the cache file cannot be used at all.
#[derive(thiserror::Error, Debug)]
pub enum CacheError {
    /// Creating its directory or its lock file failed.
    #[error("worker lease cache {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Another live process holds the lock of this file.
    #[error(
        "worker lease cache {0}: another process uses this file (give each server its own snowflake.worker.cache_file)"
    )]
    Locked(PathBuf),
}

/// The cache file of this process, locked for its lifetime.
#[derive(Debug)]
pub struct WorkerCache {
    path: PathBuf,
    scope: String,
    boot_id: Option<String>,
    /// Set by [`Self::remove`]: no write lands after it. Writes and the removal hold this lock,
    /// so a write still in flight when the lease is released cannot bring the file back.
    closed: std::sync::Mutex<bool>,
    /// Holds the `flock` until the process exits.
    _lock: File,
}

impl WorkerCache {
    /// Opens (creating its directory) and locks the cache at `path` for leases of `layout` in the
    /// database named `database` (its URL without password: a lease of another database
    /// proves nothing here).
    pub fn open(
        path: impl Into<PathBuf>,
        layout: &BitLayout,
        database: &str,
    ) -> Result<Self, CacheError> {
        let path = path.into();
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(with_suffix(&path, ".lock"))
            .map_err(io)?;
        // SAFETY: a valid open descriptor; flock does not touch memory.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
                CacheError::Locked(path)
            } else {
                io(e)
            });
        }
        let scope = format!(
            "layout {} unit {}ms epoch {} prefix {}; database {database}",
            layout.bits_string(),
            layout.unit().tick_ms(),
            layout.epoch_ms(),
            layout.prefix_value()
        );
        Ok(Self {
            path,
            scope,
            boot_id: read_boot_id(),
            closed: std::sync::Mutex::new(false),
            _lock: lock,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This machine's boot id, if it has one (changes on every boot).
    pub fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }

    /// A record of this cache's scope and boot, with the given lease fields.
    pub fn record(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_tick: i64,
        written_unix_ms: i64,
        written_boot_ms: i64,
    ) -> CachedLease {
        CachedLease {
            format: FORMAT.into(),
            scope: self.scope.clone(),
            worker_id,
            owner: owner.into(),
            lease_until_ms,
            last_tick,
            written_unix_ms,
            written_boot_ms,
            boot_id: self.boot_id.clone(),
        }
    }

    /// The cached lease, or `None` (no file; or one that is unreadable, corrupt, of another
    /// format, layout or database: logged and ignored).
    pub fn load(&self) -> Option<CachedLease> {
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                warn!(path = %self.path.display(), error = %e, "worker lease cache unreadable: ignored");
                return None;
            }
        };
        let lease: CachedLease = match serde_json::from_slice(&text) {
            Ok(l) => l,
            Err(e) => {
                warn!(path = %self.path.display(), error = %e, "worker lease cache corrupt: ignored");
                return None;
            }
        };
        if lease.format != FORMAT {
            warn!(path = %self.path.display(), format = %lease.format, expected = FORMAT,
                "worker lease cache of another format: ignored");
            return None;
        }
        if lease.scope != self.scope {
            warn!(path = %self.path.display(), cached = %lease.scope, current = %self.scope,
                "worker lease cache of another layout or database: ignored");
            return None;
        }
        Some(lease)
    }

    /// Writes `lease` atomically: a temporary file, fsync, rename over the file, fsync of the
    /// directory; nothing once [`Self::remove`] ran. Blocking: call it off the async threads.
    pub fn store(&self, lease: &CachedLease) -> std::io::Result<()> {
        let closed = self.lock_closed();
        if *closed {
            return Ok(());
        }
        let tmp = with_suffix(&self.path, ".tmp");
        let body = serde_json::to_vec(lease).map_err(std::io::Error::other)?;
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        self.sync_dir()
    }

    /// Removes the file (and makes the removal durable); no write lands after this. Blocking:
    /// call it off the async threads.
    pub fn remove(&self) -> std::io::Result<()> {
        let mut closed = self.lock_closed();
        *closed = true;
        match std::fs::remove_file(&self.path) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn lock_closed(&self) -> std::sync::MutexGuard<'_, bool> {
        self.closed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn sync_dir(&self) -> std::io::Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn read_boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cache: &WorkerCache) -> CachedLease {
        cache.record(7, "owner-a", 1_000_000, 42, 900_000, 5_000)
    }

    #[test]
    fn a_stored_lease_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/worker.json");
        let cache = WorkerCache::open(&path, &BitLayout::twitter(), "db").unwrap();
        assert_eq!(cache.load(), None);
        let lease = record(&cache);
        cache.store(&lease).unwrap();
        assert_eq!(cache.load(), Some(lease.clone()));
        cache.remove().unwrap();
        assert_eq!(cache.load(), None);
        cache.remove().unwrap();
        // Removed means closed: a write still in flight lands nowhere.
        cache.store(&lease).unwrap();
        assert_eq!(cache.load(), None);
    }

    #[test]
    fn corrupt_or_foreign_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.json");
        let cache = WorkerCache::open(&path, &BitLayout::twitter(), "db").unwrap();
        std::fs::write(&path, b"{\"format\": 3").unwrap();
        assert_eq!(cache.load(), None);
        let mut other = record(&cache);
        other.format = "leafid-worker-lease-0".into();
        std::fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
        assert_eq!(cache.load(), None);
        drop(cache);
        // The same file under another database is not this lease.
        let first = WorkerCache::open(&path, &BitLayout::twitter(), "db").unwrap();
        first.store(&record(&first)).unwrap();
        drop(first);
        let second = WorkerCache::open(&path, &BitLayout::twitter(), "other-db").unwrap();
        assert_eq!(second.load(), None);
    }

    #[test]
    fn one_file_serves_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker.json");
        let _held = WorkerCache::open(&path, &BitLayout::twitter(), "db").unwrap();
        // flock locks belong to the open file description: a second open conflicts even here.
        assert!(matches!(
            WorkerCache::open(&path, &BitLayout::twitter(), "db"),
            Err(CacheError::Locked(_))
        ));
    }
}
