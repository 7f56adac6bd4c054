//! The owner row of a strict tag (`leafid_strict_owner`) and the store that reads and moves it.
//!
//! Every write is one compare-and-set statement, so the database orders them: a takeover
//! succeeds only on the version the taker saw, a renewal or a release only for the epoch and
//! the server that hold the tag. No clock is stored: time is measured by each server on its own
//! boot-time clock ([`super::clock`]).

use async_trait::async_trait;

use crate::segment::StoreError;

/// One strict tag's owner row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRow {
    /// The owning server's instance id; `None` when no server holds the tag (never held, or
    /// released at a graceful stop).
    pub owner: Option<String>,
    /// Where the others forward the tag's requests (`http://host:port`).
    pub address: Option<String>,
    /// What a forwarded request presents to the owner.
    pub peer_key: Option<String>,
    /// Bumped by every takeover.
    pub epoch: i64,
    /// Bumped by every write (takeover, renewal, release).
    pub version: i64,
    /// The lease of the server that took the tag over last, in ms: a taker waits out the
    /// longer of its own and this one, so servers configured with different
    /// `segment.strict_lease_ms` (an operator's slip) still never overlap.
    pub lease_ms: u64,
}

/// What a server writes into the row when it takes a tag over.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// This process's instance id (new at every start).
    pub owner: &'a str,
    /// Where this server is reached by its peers.
    pub address: &'a str,
    /// A fresh random key for this takeover.
    pub peer_key: &'a str,
    /// The taker's lease (`segment.strict_lease_ms`), written for the next taker.
    pub lease_ms: u64,
}

/// The owner rows, on the tags' database.
#[async_trait]
pub trait OwnerStore: Send + Sync + 'static {
    /// The tag's row, made (no owner, epoch 0, version 0) if it has none yet.
    async fn read_owner(&self, biz_tag: &str) -> Result<OwnerRow, StoreError>;

    /// Takes the tag over if its version is still `seen`'s: owner, address and key set to
    /// `claim`'s, epoch and version bumped. The new epoch (`seen.epoch + 1`: the epoch moves
    /// only with the version), or `None` if the row had moved.
    async fn take_over(
        &self,
        biz_tag: &str,
        seen: &OwnerRow,
        claim: &Claim<'_>,
    ) -> Result<Option<i64>, StoreError>;

    /// Renews the tag for `owner` at `epoch` (the version bumped): `false` if another server
    /// took it over (or it was released).
    async fn renew(&self, biz_tag: &str, epoch: i64, owner: &str) -> Result<bool, StoreError>;

    /// Gives the tag up (owner cleared, version bumped), only if `owner` holds it at `epoch`.
    async fn release(&self, biz_tag: &str, epoch: i64, owner: &str) -> Result<bool, StoreError>;

    /// Removes the tag's row (the tag was deleted): the owner's next renewal fails, so it stops
    /// serving from memory within a renewal period.
    async fn remove(&self, biz_tag: &str) -> Result<(), StoreError>;
}
