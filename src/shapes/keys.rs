//! The keys of permuted tags: `[shapes.keys]` of the configuration maps a key id to a file
//! holding the key. Never from the database: the database holds only the key id, with the
//! tag's format, so a copy of the database (a backup, a replica, a DBA's dump) cannot undo the
//! permutation.
//!
//! A key file holds 64 hexadecimal characters (32 bytes, AES-256), surrounding whitespace
//! ignored, and must not be readable by every user of the machine. Anything else stops the
//! start with a message naming the key id and the file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

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

/// The permutation keys this server holds, by key id.
#[derive(Clone, Default)]
pub struct KeyRing {
    keys: HashMap<String, Key>,
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
            keys.insert(id.clone(), read_key(id, path)?);
        }
        Ok(Self { keys })
    }

    /// A ring of the given keys (tests, benches).
    pub fn from_keys(keys: impl IntoIterator<Item = (String, Key)>) -> Self {
        Self {
            keys: keys.into_iter().collect(),
        }
    }

    /// The key of `id`, if this server holds it.
    pub fn get(&self, id: &str) -> Option<&Key> {
        self.keys.get(id)
    }
}

/// The key file of key `id`: 64 hex characters, not readable by every user.
fn read_key(id: &str, path: &Path) -> Result<Key, KeyError> {
    let unreadable = |source| KeyError::Unreadable {
        key_id: id.to_owned(),
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
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
    let text = std::fs::read_to_string(path).map_err(unreadable)?;
    parse_hex_key(text.trim()).ok_or_else(|| KeyError::BadHex {
        key_id: id.to_owned(),
        path: path.to_owned(),
    })
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
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let good = file(&format!("{hex}\n"), 0o600);
        let ring = KeyRing::load(&[("k1".to_owned(), good.path().into())].into()).unwrap();
        assert_eq!(ring.get("k1").unwrap()[1], 0x11);
        assert_eq!(ring.get("k1").unwrap()[31], 0xff);
        assert!(ring.get("k2").is_none());
        assert!(!format!("{ring:?}").contains("11"), "{ring:?}");

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
}
