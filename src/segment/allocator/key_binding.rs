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
    /// be the one the database records for the key id ([`TagSpec::verified_permutation`]).
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
                let verdict = binding
                    .verify(&*self.inner.store, timeout)
                    .await
                    .cloned();
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
