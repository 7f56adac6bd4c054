//! Which key a key id is bound to on one engine's database (issue 42): the check value of the
//! key this server holds ([`crate::shapes::key_check`]) against the one the database recorded
//! for the key id when it was first used (`leafid_shape_key`, [`SpecStore::bind_key`]).
//!
//! **Why no code repeats across two keys under one key id.** FF1 under two keys is two
//! unrelated permutations of one domain: the codes of one server's sequences collide with the
//! other's by chance (the 21 to 30 of 5,000). The database records one check value per
//! key id, written once; a server serves and decodes a permuted tag only after its own key's
//! check value was found equal to the recorded one ([`KeyBinding::verify`], asked before any
//! permuted id is handed out or read), so every code of a key id, on every server of the
//! database, is made with one key. A server whose key differs ([`KeyVerdict::Differs`]) never
//! serves a code of the key id's tags; one that cannot reach the database serves none either
//! (the verdict stays unknown, and the request answers `database_unavailable`).
//!
//! A verdict, once read, is kept for the engine's life: a recorded check value never changes,
//! nor does a key file while the server runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::segment::store::{SpecStore, StoreError};

/// What the database says of this server's key for a key id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyVerdict {
    /// The database records this key's check value (recorded now, or by an earlier use).
    Matches,
    /// The database records another key's check value: this key is refused for good.
    Differs {
        /// The check value recorded.
        recorded: String,
    },
}

/// One key id's binding on one engine's database: this server's check value, and the verdict
/// once known.
#[derive(Debug)]
pub struct KeyBinding {
    key_id: String,
    check: String,
    verdict: OnceCell<KeyVerdict>,
}

impl KeyBinding {
    /// The binding of `key_id`, whose key here has the check value `check`, not verified yet.
    pub fn new(key_id: &str, check: &str) -> Self {
        Self {
            key_id: key_id.to_owned(),
            check: check.to_owned(),
            verdict: OnceCell::new(),
        }
    }

    /// The key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// This server's check value of the key.
    pub fn check(&self) -> &str {
        &self.check
    }

    /// The verdict, if known.
    pub fn known(&self) -> Option<&KeyVerdict> {
        self.verdict.get()
    }

    /// The verdict: the known one, else the database's, recording this key's check value if
    /// none is ([`SpecStore::bind_key`]). One call at a time asks the database, the others
    /// wait for its answer; every call gives up after `timeout` in all (waiting included, so
    /// requests queued behind a database that does not answer each wait at most `timeout`). A
    /// failed or abandoned call leaves the verdict unknown, so the next one asks again
    /// (nothing is served meanwhile).
    pub async fn verify<S: SpecStore + ?Sized>(
        &self,
        store: &S,
        timeout: Duration,
    ) -> Result<&KeyVerdict, StoreError> {
        // The known verdict costs no timer: every request of a permuted tag comes here.
        if let Some(v) = self.verdict.get() {
            return Ok(v);
        }
        let ask = self.verdict.get_or_try_init(|| async {
            let recorded = store.bind_key(&self.key_id, &self.check).await?;
            Ok(if recorded == self.check {
                KeyVerdict::Matches
            } else {
                KeyVerdict::Differs { recorded }
            })
        });
        tokio::time::timeout(timeout, ask).await.map_err(|_| {
            StoreError::Unavailable(
                format!(
                    "binding key id \"{}\" timed out after {timeout:?}",
                    self.key_id
                )
                .into(),
            )
        })?
    }
}

/// The bindings of one engine, by key id: one per key id, shared by every spec of the engine
/// that uses it.
#[derive(Debug, Default)]
pub struct KeyBindings {
    // A std Mutex: held only to find or add an entry, never across an await.
    by_id: Mutex<HashMap<String, Arc<KeyBinding>>>,
}

impl KeyBindings {
    /// The binding of `key_id`, with this server's check value `check`: the engine's one.
    pub fn of(&self, key_id: &str, check: &str) -> Arc<KeyBinding> {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        by_id
            .entry(key_id.to_owned())
            .or_insert_with(|| Arc::new(KeyBinding::new(key_id, check)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;
    use std::sync::atomic::Ordering;

    #[tokio::test]
    async fn the_first_key_binds_and_another_is_refused_for_good() {
        let store = MemoryStore::default();
        let t = Duration::from_secs(1);
        let a = KeyBinding::new("codes", "kcv1:aaaaaaaaaaaaaaaa");
        assert_eq!(a.known(), None);
        assert_eq!(a.verify(&store, t).await.unwrap(), &KeyVerdict::Matches);
        let b = KeyBinding::new("codes", "kcv1:bbbbbbbbbbbbbbbb");
        assert_eq!(
            b.verify(&store, t).await.unwrap(),
            &KeyVerdict::Differs {
                recorded: "kcv1:aaaaaaaaaaaaaaaa".into()
            }
        );
        // Kept: even with the database down, the verdict stands.
        store.failing.store(true, Ordering::Relaxed);
        assert!(matches!(
            b.verify(&store, t).await,
            Ok(KeyVerdict::Differs { .. })
        ));
        assert_eq!(a.verify(&store, t).await.unwrap(), &KeyVerdict::Matches);
    }

    #[tokio::test]
    async fn a_database_that_fails_or_hangs_leaves_the_verdict_unknown() {
        let store = MemoryStore::default();
        let b = KeyBinding::new("codes", "kcv1:aaaaaaaaaaaaaaaa");
        store.failing.store(true, Ordering::Relaxed);
        assert!(matches!(
            b.verify(&store, Duration::from_secs(1)).await,
            Err(StoreError::Unavailable(_))
        ));
        assert_eq!(b.known(), None);
        store.failing.store(false, Ordering::Relaxed);
        store.delay_ms.store(2_000, Ordering::Relaxed);
        let e = b
            .verify(&store, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("timed out") || format!("{e:?}").contains("timed out"));
        assert_eq!(b.known(), None);
        store.delay_ms.store(0, Ordering::Relaxed);
        assert_eq!(
            b.verify(&store, Duration::from_secs(1)).await.unwrap(),
            &KeyVerdict::Matches
        );
    }

    /// Requests queued behind a database that does not answer each give up after the timeout,
    /// not after the ones before them.
    #[tokio::test]
    async fn queued_requests_each_wait_at_most_the_timeout() {
        let store = Arc::new(MemoryStore::default());
        store.delay_ms.store(60_000, Ordering::Relaxed);
        let b = Arc::new(KeyBinding::new("codes", "kcv1:aaaaaaaaaaaaaaaa"));
        // Taken before the first request starts: the bound below errs on the long side.
        let started = std::time::Instant::now();
        // 100 in a row at 100 ms each would take 10 s; each on its own, about 0.1 s. The bound
        // (5 s) leaves a busy machine 50 times the expected time and still tells them apart.
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let (b, store) = (b.clone(), store.clone());
                tokio::spawn(
                    async move { b.verify(&*store, Duration::from_millis(100)).await.is_err() },
                )
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(b.known(), None);
    }

    #[test]
    fn one_binding_per_key_id_per_engine() {
        let bindings = KeyBindings::default();
        let a = bindings.of("codes", "kcv1:aaaaaaaaaaaaaaaa");
        let again = bindings.of("codes", "kcv1:aaaaaaaaaaaaaaaa");
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(
            &a,
            &bindings.of("other", "kcv1:aaaaaaaaaaaaaaaa")
        ));
    }
}
