//! The keys of permuted tags: `[shapes.keys]` of the configuration maps a key id to a file
//! holding the key. Never from the database: the database holds only the key id, with the
//! tag's format, so a copy of the database (a backup, a replica, a DBA's dump) cannot undo the
//! permutation.
//!
//! A key file is a regular file (never a FIFO, a directory or a device: checked before it is
//! opened, so a FIFO cannot hang the start) holding 64 hexadecimal characters (32 bytes,
//! AES-256), surrounding whitespace ignored, that is not readable by every user of the machine
//! and is no plainly weak key ([`key_check::weakness`]). Anything else stops the start with a
//! message naming the key id and the file.
//!
//! Each key's check value ([`key_check::check_value`]) is made once here; the database records
//! it per key id (issue 42), never the key.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::key_check;
use super::permute::Key;

/// Longest key id.
pub const MAX_KEY_ID: usize = 32;

/// Whether `id` is a valid key id: 1 to 32 of `a-z 0-9 _` (environment variables set it as
/// `LEAFID__SHAPES__KEYS__<ID>`, which the configuration reads in lower case).
pub fn valid_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The permutation keys this server holds, by key id, with their check values and files.
#[derive(Clone, Default)]
pub struct KeyRing {
    keys: HashMap<String, HeldKey>,
}

/// One key of a [`KeyRing`].
#[derive(Clone)]
struct HeldKey {
    key: Key,
    /// [`key_check::check_value`] of `key`.
    check: String,
    /// The file it was read from (`None` for a key given in code).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ids only, never a key.
        let mut ids: Vec<&String> = self.keys.keys().collect();
        ids.sort();
        f.debug_struct("KeyRing").field("ids", &ids).finish()
    }
}

/// Why the keys of `[shapes.keys]` cannot be read: each names the key id and, for a file, its
/// path. A configuration fault: it stops the start.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key id is not 1 to [`MAX_KEY_ID`] of `a-z 0-9 _`.
    #[error("shapes.keys.{key_id}: a key id is 1 to {MAX_KEY_ID} of a-z 0-9 _")]
    BadKeyId {
        /// The key id.
        key_id: String,
    },
    /// The key file cannot be read.
    #[error("shapes.keys.{key_id}: key file {}: {source}", path.display())]
    Unreadable {
        /// The key id.
        key_id: String,
        /// The key file.
        path: PathBuf,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The key file may be read by every user of the machine.
    #[error(
        "shapes.keys.{key_id}: key file {} is readable by every user: chmod 600 it (or 640 for \
         a group)",
        path.display()
    )]
    WorldReadable {
        /// The key id.
        key_id: String,
        /// The key file.
        path: PathBuf,
    },
    /// The key file is far too large to hold a key.
    #[error("shapes.keys.{key_id}: key file {} is not a key: {len} bytes", path.display())]
    TooLarge {
        /// The key id.
        key_id: String,
        /// The key file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
    /// The key path is not a regular file (a FIFO, a directory, a device...): refused from its
    /// metadata, before it is opened, so a FIFO never blocks the start.
    #[error(
        "shapes.keys.{key_id}: key path {} is not a regular file ({kind}): a key file is a \
         plain file of 64 hexadecimal characters",
        path.display()
    )]
    NotAFile {
        /// The key id.
        key_id: String,
        /// The key path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The key is plainly not random ([`key_check::weakness`]).
    #[error(
        "shapes.keys.{key_id}: key file {} holds a weak key ({why}): make one with \
         `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`",
        path.display()
    )]
    Weak {
        /// The key id.
        key_id: String,
        /// The key file.
        path: PathBuf,
        /// What makes it weak.
        why: &'static str,
    },
    /// The key file does not hold 64 hexadecimal characters.
    #[error(
        "shapes.keys.{key_id}: key file {} must hold 64 hexadecimal characters (a 32-byte \
         AES-256 key)",
        path.display()
    )]
    BadHex {
        /// The key id.
        key_id: String,
        /// The key file.
        path: PathBuf,
    },
}

impl KeyRing {
    /// Reads every key file of `files` (key id -> path).
    pub fn load(files: &BTreeMap<String, PathBuf>) -> Result<Self, KeyError> {
        let mut keys = HashMap::new();
        for (id, path) in files {
            if !valid_key_id(id) {
                return Err(KeyError::BadKeyId { key_id: id.clone() });
            }
            let key = read_key(id, path)?;
            keys.insert(
                id.clone(),
                HeldKey {
                    check: key_check::check_value(&key),
                    key,
                    path: Some(path.clone()),
                },
            );
        }
        Ok(Self { keys })
    }

    /// A ring of the given keys (tests, benches): not checked for weakness.
    pub fn from_keys(keys: impl IntoIterator<Item = (String, Key)>) -> Self {
        Self {
            keys: keys
                .into_iter()
                .map(|(id, key)| {
                    let held = HeldKey {
                        check: key_check::check_value(&key),
                        key,
                        path: None,
                    };
                    (id, held)
                })
                .collect(),
        }
    }

    /// The key of `id`, if this server holds it.
    pub fn get(&self, id: &str) -> Option<&Key> {
        self.keys.get(id).map(|k| &k.key)
    }

    /// The check value of the key of `id` ([`key_check::check_value`]), if this server holds
    /// it.
    pub fn check_value(&self, id: &str) -> Option<&str> {
        self.keys.get(id).map(|k| k.check.as_str())
    }

    /// The file the key of `id` was read from, if it came from one.
    pub fn path(&self, id: &str) -> Option<&Path> {
        self.keys.get(id).and_then(|k| k.path.as_deref())
    }

    /// Every key id held, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

/// What a path that is not a regular file is, for [`KeyError::NotAFile`].
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a plain file"
    }
}

/// The key file of key `id`: a regular file of 64 hex characters, not readable by every user,
/// and no weak key.
pub fn read_key(id: &str, path: &Path) -> Result<Key, KeyError> {
    let unreadable = |source| KeyError::Unreadable {
        key_id: id.to_owned(),
        path: path.to_owned(),
        source,
    };
    let not_a_file = |kind| KeyError::NotAFile {
        key_id: id.to_owned(),
        path: path.to_owned(),
        kind,
    };
    // `metadata` is a `stat`: it never blocks, whatever the path is. Opening a FIFO would wait
    // for a writer, so nothing but a regular file is opened.
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(not_a_file(kind_of(&meta)));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o004 != 0 {
            return Err(KeyError::WorldReadable {
                key_id: id.to_owned(),
                path: path.to_owned(),
            });
        }
    }
    if meta.len() > 1024 {
        return Err(KeyError::TooLarge {
            key_id: id.to_owned(),
            path: path.to_owned(),
            len: meta.len(),
        });
    }
    let text = read_regular(path).map_err(|e| match e {
        Opened::Io(source) => unreadable(source),
        Opened::NotAFile(kind) => not_a_file(kind),
    })?;
    let key = parse_hex_key(text.trim()).ok_or_else(|| KeyError::BadHex {
        key_id: id.to_owned(),
        path: path.to_owned(),
    })?;
    if let Some(why) = key_check::weakness(&key) {
        return Err(KeyError::Weak {
            key_id: id.to_owned(),
            path: path.to_owned(),
            why,
        });
    }
    Ok(key)
}

/// Why [`read_regular`] read nothing.
enum Opened {
    Io(std::io::Error),
    NotAFile(&'static str),
}

/// The text of the regular file `path`, opened without blocking (`O_NONBLOCK`: a path swapped
/// for a FIFO after the `stat` above does not wait for a writer either) and checked again on
/// the open file (`fstat`), at most 1024 bytes.
fn read_regular(path: &Path) -> Result<String, Opened> {
    use std::io::Read;
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(libc::O_NONBLOCK);
    }
    let file = open.open(path).map_err(Opened::Io)?;
    let meta = file.metadata().map_err(Opened::Io)?;
    if !meta.is_file() {
        return Err(Opened::NotAFile(kind_of(&meta)));
    }
    let mut text = String::new();
    file.take(1025)
        .read_to_string(&mut text)
        .map_err(Opened::Io)?;
    Ok(text)
}

/// 64 hex characters as 32 bytes.
pub fn parse_hex_key(text: &str) -> Option<Key> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(text: &str, mode: u32) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn a_key_file_is_read_and_bad_ones_stop_the_start() {
        let hex = "9f3c0a7e51d2b8640e1fa3c97d5b2e8841c6f00d3ab57e92c4186d2fe0b9a375";
        let good = file(&format!("{hex}\n"), 0o600);
        let ring = KeyRing::load(&[("k1".to_owned(), good.path().into())].into()).unwrap();
        assert_eq!(ring.get("k1").unwrap()[1], 0x3c);
        assert_eq!(ring.get("k1").unwrap()[31], 0x75);
        assert_eq!(ring.path("k1"), Some(good.path()));
        assert_eq!(ring.ids(), ["k1"]);
        let check = ring.check_value("k1").unwrap();
        assert!(check.starts_with("kcv1:") && check.len() == 21, "{check}");
        assert!(ring.get("k2").is_none());
        assert!(!format!("{ring:?}").contains("3c"), "{ring:?}");

        let open = file(hex, 0o644);
        let e = KeyRing::load(&[("k1".to_owned(), open.path().into())].into()).unwrap_err();
        assert!(
            matches!(&e, KeyError::WorldReadable { key_id, .. } if key_id == "k1"),
            "{e}"
        );
        assert!(e.to_string().contains("readable by every user"), "{e}");
        let short = file(&hex[..62], 0o600);
        let e = KeyRing::load(&[("k1".to_owned(), short.path().into())].into()).unwrap_err();
        assert!(
            matches!(&e, KeyError::BadHex { path, .. } if path == short.path()),
            "{e}"
        );
        assert!(e.to_string().contains("64 hexadecimal"), "{e}");
        let e = KeyRing::load(&[("K-1".to_owned(), good.path().into())].into()).unwrap_err();
        assert!(
            matches!(&e, KeyError::BadKeyId { key_id } if key_id == "K-1"),
            "{e}"
        );
        let e = KeyRing::load(&[("k1".to_owned(), "/nonexistent/k".into())].into()).unwrap_err();
        assert!(matches!(e, KeyError::Unreadable { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/k"), "{e}");
        let big = file(&"0".repeat(2000), 0o600);
        let e = KeyRing::load(&[("k1".to_owned(), big.path().into())].into()).unwrap_err();
        assert!(matches!(e, KeyError::TooLarge { len: 2000, .. }), "{e}");
    }

    #[test]
    fn a_weak_key_is_refused_naming_why() {
        for (text, why) in [
            ("0".repeat(64), "equal"),
            ("ab".repeat(32), "equal"),
            (
                "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f".to_owned(),
                "arithmetic",
            ),
            ("0123456789abcdef".repeat(4), "distinct"),
        ] {
            let f = file(&text, 0o600);
            let e = KeyRing::load(&[("k1".to_owned(), f.path().into())].into()).unwrap_err();
            assert!(
                matches!(&e, KeyError::Weak { key_id, path, .. } if key_id == "k1" && path == f.path()),
                "{text}: {e}"
            );
            assert!(e.to_string().contains(why), "{e}");
            assert!(e.to_string().contains("/dev/urandom"), "{e}");
        }
    }

    /// A FIFO as the key path is refused from its metadata, never opened: with no writer, an
    /// open would wait for good, so a test that finishes at all shows it was not opened.
    #[test]
    fn a_fifo_or_a_directory_as_the_key_path_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("codes.key");
        let made = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let e = KeyRing::load(&[("k1".to_owned(), fifo.clone())].into()).unwrap_err();
        // A FIFO would block forever: any bound tells the two apart; this one is generous.
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert!(
            matches!(&e, KeyError::NotAFile { kind: "a FIFO", path, .. } if path == &fifo),
            "{e}"
        );
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // Read past the stat (as if swapped in after it): the non-blocking open and the check
        // of the open file refuse it too, at once.
        let started = std::time::Instant::now();
        assert!(matches!(read_regular(&fifo), Err(Opened::NotAFile(_))));
        // A FIFO would block forever: any bound tells the two apart; this one is generous.
        assert!(started.elapsed() < std::time::Duration::from_secs(10));

        let sub = dir.path().join("keys");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = KeyRing::load(&[("k1".to_owned(), sub.clone())].into()).unwrap_err();
        assert!(
            matches!(
                &e,
                KeyError::NotAFile {
                    kind: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        let e = KeyRing::load(&[("k1".to_owned(), "/dev/null".into())].into()).unwrap_err();
        assert!(
            matches!(
                &e,
                KeyError::NotAFile {
                    kind: "a device",
                    ..
                }
            ),
            "{e}"
        );
    }
}
