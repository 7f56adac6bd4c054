//! The engine's side of the key bindings (`crate::segment::spec::binding`): a decode's check,
//! a new permuted tag's, and the check of every configured key at start.

use super::SegmentAllocator;
use super::formatted::FormatConflict;
use crate::segment::error::SegmentError;
use crate::segment::spec::{KeyVerdict, SpecError, TagSpec};
use crate::segment::store::StoreError;

/// One configured key against the engine's database ([`SegmentAllocator::verify_keys`]).
#[derive(Debug)]
pub struct KeyReport {
    /// The key id.
    pub key_id: String,
    /// This server's check value of its key.
    pub check: String,
    /// The database's verdict (this key recorded now or before, or another one), or why the
    /// database could not tell.
    pub verdict: Result<KeyVerdict, StoreError>,
}

impl SegmentAllocator {
    /// Whether this server may read ids of `spec` back: for a permuted tag, its key here must
    /// be the one the database records for the key id (`TagSpec::verified_permutation`).
    pub async fn verify_key(&self, spec: &TagSpec) -> Result<(), SegmentError> {
        spec.verified_permutation(&*self.inner.store, self.inner.config.load_timeout)
            .await
            .map(drop)
    }

    /// Binds the key id of a new permuted tag (recorded now if no key is): a key the database
    /// does not record is [`SpecError::KeyMismatch`], the caller's to fix.
    pub(super) async fn bind_key_for_new_tag(&self, key_id: &str) -> Result<(), FormatConflict> {
        let keys = &self.inner.config.keys;
        let Some(check) = keys.check_value(key_id) else {
            return Err(SpecError::KeyMissing {
                key_id: key_id.to_owned(),
            }
            .into());
        };
        let binding = self.inner.specs.binding(key_id, check);
        match binding
            .verify(&*self.inner.store, self.inner.config.load_timeout)
            .await?
        {
            KeyVerdict::Matches => Ok(()),
            KeyVerdict::Differs { recorded } => Err(SpecError::KeyMismatch {
                key_id: key_id.to_owned(),
                check: check.to_owned(),
                recorded: recorded.clone(),
            }
            .into()),
        }
    }

    /// Every key of `[shapes.keys]` against the engine's database, by key id: each recorded
    /// now if no key is, so a server whose key differs learns it at start. Stops at the first
    /// database error (the last report holds it): a database that does not answer must not
    /// hold the start, and a key not verified now is verified at its first use.
    pub async fn verify_keys(&self) -> Vec<KeyReport> {
        let keys = self.inner.config.keys.clone();
        let timeout = self.inner.config.load_timeout;
        let checks = keys.ids().into_iter().map(|id| {
            let check = keys.check_value(id).unwrap_or_default().to_owned();
            let binding = self.inner.specs.binding(id, &check);
            async move {
                let verdict = binding.verify(&*self.inner.store, timeout).await.cloned();
                KeyReport {
                    key_id: id.to_owned(),
                    check,
                    verdict,
                }
            }
        });
        let mut reports = Vec::new();
        // One after the other, a round trip each; a database that fails or does not answer
        // stops the round (the rest are verified at first use), so the start waits at most
        // one `load_timeout` for it.
        for check in checks {
            let report = check.await;
            let failed = report.verdict.is_err();
            reports.push(report);
            if failed {
                break;
            }
        }
        reports
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::error::Error;
    use crate::segment::{BizTag, NewTag, SegmentConfig, SpecStore};
    use crate::shapes::TagFormat;
    use crate::shapes::keys::KeyRing;
    use crate::testing::MemoryStore;

    const CODES: &str = r#"{"prefix":"C-","width":8,"permute":{"key_id":"codes"}}"#;

    fn engine(store: &Arc<MemoryStore>, key: [u8; 32]) -> SegmentAllocator {
        let config = SegmentConfig {
            keys: Arc::new(KeyRing::from_keys([("codes".to_owned(), key)])),
            ..SegmentConfig::default()
        };
        SegmentAllocator::new(store.clone(), config)
    }

    async fn create(e: &SegmentAllocator, tag: &str) -> Result<(), FormatConflict> {
        let new = NewTag {
            biz_tag: tag.to_owned(),
            step: 10,
            max_id: 1,
            description: None,
        };
        let format: TagFormat = serde_json::from_str(CODES).unwrap();
        e.create_formatted_tag(&new, &format).await.map(drop)
    }

    async fn codes(e: &SegmentAllocator, tag: &str, n: u64) -> Result<Vec<String>, SegmentError> {
        let spec = e
            .spec_of(&BizTag::parse(tag).unwrap())
            .await?
            .expect("formatted");
        let ids = e.next_texts(&spec, n).await?;
        let mut out = Vec::new();
        let _ = ids.for_each(|s| {
            out.push(s.to_owned());
            Ok::<_, ()>(())
        });
        Ok(out)
    }

    /// Two servers on one database with different keys under one key id: the first binds and
    /// serves; the second serves, decodes and creates nothing under the key id, with a message
    /// naming the key id and both check values; no code is served twice.
    #[tokio::test]
    async fn a_second_key_under_one_key_id_is_refused_everywhere() {
        let store = Arc::new(MemoryStore::default());
        let a = engine(&store, [0x11; 32]);
        let b = engine(&store, [0x22; 32]);
        create(&a, "tickets").await.unwrap();
        let from_a = codes(&a, "tickets", 50).await.unwrap();
        assert_eq!(from_a.len(), 50);
        let before = store.leases.load(Ordering::Relaxed);
        let e = codes(&b, "tickets", 50).await.unwrap_err();
        let SegmentError::KeyMismatch { ref tag, ref why } = e else {
            panic!("{e:?}")
        };
        assert_eq!(tag.as_str(), "tickets");
        let check_a = crate::shapes::key_check::check_value(&[0x11; 32]);
        let check_b = crate::shapes::key_check::check_value(&[0x22; 32]);
        assert_eq!(
            why,
            &SpecError::KeyMismatch {
                key_id: "codes".into(),
                check: check_b.clone(),
                recorded: check_a.clone()
            }
        );
        // Refused before any lease: no id of the tag was taken for it.
        assert_eq!(store.leases.load(Ordering::Relaxed), before);
        let message = e.to_string();
        for needle in [
            "tickets",
            "\"codes\"",
            check_a.as_str(),
            "very same key file",
            "docs/shapes.md#rotating-a-key",
        ] {
            assert!(message.contains(needle), "{needle:?} in {message}");
        }
        // The client's code is the existing one.
        assert_eq!(Error::from(e).code(), "key_unavailable");
        // Decode: refused too (it would read a wrong sequence).
        let spec = b
            .spec_of(&BizTag::parse("tickets").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            b.verify_key(&spec).await,
            Err(SegmentError::KeyMismatch { .. })
        ));
        assert!(matches!(
            spec.decode(&from_a[0]),
            Err(crate::segment::DecodeError::Segment(
                SegmentError::KeyMismatch { .. }
            ))
        ));
        // A new tag under the key id: refused as the caller's error, nothing written.
        match create(&b, "tickets2").await {
            Err(FormatConflict::Spec(SpecError::KeyMismatch { key_id, .. })) => {
                assert_eq!(key_id, "codes");
            }
            other => panic!("{other:?}"),
        }
        assert!(store.get_format("tickets2").await.unwrap().is_none());
        // The first server goes on serving; all its codes are distinct.
        let more = codes(&a, "tickets", 50).await.unwrap();
        let all: HashSet<&String> = from_a.iter().chain(&more).collect();
        assert_eq!(all.len(), 100);
        // Both reports at start: the first matches, the second differs.
        let ra = a.verify_keys().await;
        assert!(matches!(ra[0].verdict, Ok(KeyVerdict::Matches)), "{ra:?}");
        let rb = b.verify_keys().await;
        assert!(
            matches!(&rb[0].verdict, Ok(KeyVerdict::Differs { recorded }) if *recorded == check_a),
            "{rb:?}"
        );
    }

    /// A database that does not answer the binding: no code, `database_unavailable`; the next
    /// request after it returns binds and serves.
    #[tokio::test]
    async fn no_code_is_served_before_the_key_is_verified() {
        let store = Arc::new(MemoryStore::default());
        let a = engine(&store, [0x33; 32]);
        create(&a, "tickets").await.unwrap();
        // A second server with the same key, first use while the database is down.
        let b = engine(&store, [0x33; 32]);
        let spec = b
            .spec_of(&BizTag::parse("tickets").unwrap())
            .await
            .unwrap()
            .unwrap();
        store.failing.store(true, Ordering::Relaxed);
        let e = b.next_texts(&spec, 5).await.unwrap_err();
        assert!(matches!(e, SegmentError::Store(_)), "{e:?}");
        assert_eq!(Error::from(e).code(), "database_unavailable");
        assert!(matches!(
            b.verify_key(&spec).await,
            Err(SegmentError::Store(_))
        ));
        let reports = b.verify_keys().await;
        assert!(reports[0].verdict.is_err());
        store.failing.store(false, Ordering::Relaxed);
        assert_eq!(codes(&b, "tickets", 5).await.unwrap().len(), 5);
    }

    /// Creating a permuted tag on a fresh database binds its key id first.
    #[tokio::test]
    async fn creating_a_permuted_tag_binds_its_key() {
        let store = Arc::new(MemoryStore::default());
        let a = engine(&store, [0x44; 32]);
        assert_eq!(store.key_check("codes").await.unwrap(), None);
        create(&a, "tickets").await.unwrap();
        assert_eq!(
            store.key_check("codes").await.unwrap().as_deref(),
            Some(crate::shapes::key_check::check_value(&[0x44; 32]).as_str())
        );
    }
}
