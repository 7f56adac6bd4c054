//! [`CallerTokenStore`]: the caller tokens of `leafid_caller_token` (migration 0009), a store
//! role beside the segment store's ([`LeaseStore`](crate::segment::LeaseStore),
//! [`TagAdminStore`](crate::segment::TagAdminStore), ...) under the same contract: no default
//! bodies, implemented once for every SQL database (`crate::store::sql`'s `tokens`) and in
//! memory ([`MemoryTokens`], for tests), and checked by the same scenarios
//! (`tests/api/store_contract.rs`, `caller_tokens_*`).
//!
//! A row holds the SHA-256 of a token, never the token (`crate::access::callers`): what the
//! database leaks is a hash of 256 random bits, which no one can invert.

use async_trait::async_trait;

use crate::segment::StoreError;

/// One `leafid_caller_token` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerTokenRow {
    /// The token's name (primary key): `[A-Za-z0-9._-]{1,64}`, shown in metrics and refusals.
    pub name: String,
    /// SHA-256 of the token, lowercase hex (64 characters).
    pub token_hash: String,
    /// The scope list as stored: entries joined by `,`.
    pub tags: String,
    /// Ids per second, per tag, per server (`crate::service::quota`).
    pub rate_per_sec: Option<i64>,
    /// Burst of the rate (default: one second of it).
    pub burst: Option<i64>,
    /// Share of each period of a formatted tag, in parts per million, over every server.
    pub period_share_ppm: Option<i64>,
    /// When it was created, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// When it was revoked, ms since the Unix epoch; `None` while it admits.
    pub revoked_at_ms: Option<i64>,
}

/// What a revoke did ([`CallerTokenStore::revoke_token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// Revoked now.
    Now,
    /// It was revoked already (left unchanged: the first revocation's time stays).
    Already,
    /// No token of this name.
    Unknown,
}

/// The caller tokens of one database.
#[async_trait]
pub trait CallerTokenStore: Send + Sync + 'static {
    /// Inserts a token row. [`StoreError::AlreadyExists`] when the name is taken, revoked rows
    /// included (a revoked name is never reused silently), or the hash is (two tokens alike:
    /// 2^-256), decided by the table's keys, so of two racing creates exactly one wins.
    async fn create_token(&self, row: &CallerTokenRow) -> Result<(), StoreError>;
    /// Every row, revoked ones included, ordered by name (bytewise).
    async fn list_tokens(&self) -> Result<Vec<CallerTokenRow>, StoreError>;
    /// Sets `revoked_at_ms` to `at_ms` where the token is not revoked yet.
    async fn revoke_token(&self, name: &str, at_ms: i64) -> Result<Revoked, StoreError>;
}

/// Caller tokens in memory, for tests; passes the same contract scenarios as the databases.
#[derive(Debug, Default)]
pub struct MemoryTokens {
    rows: std::sync::Mutex<std::collections::BTreeMap<String, CallerTokenRow>>,
}

#[async_trait]
impl CallerTokenStore for MemoryTokens {
    async fn create_token(&self, row: &CallerTokenRow) -> Result<(), StoreError> {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if rows.contains_key(&row.name) || rows.values().any(|r| r.token_hash == row.token_hash) {
            return Err(StoreError::AlreadyExists);
        }
        rows.insert(row.name.clone(), row.clone());
        Ok(())
    }

    async fn list_tokens(&self) -> Result<Vec<CallerTokenRow>, StoreError> {
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        Ok(rows.values().cloned().collect())
    }

    async fn revoke_token(&self, name: &str, at_ms: i64) -> Result<Revoked, StoreError> {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match rows.get_mut(name) {
            None => Revoked::Unknown,
            Some(r) if r.revoked_at_ms.is_some() => Revoked::Already,
            Some(r) => {
                r.revoked_at_ms = Some(at_ms);
                Revoked::Now
            }
        })
    }
}
