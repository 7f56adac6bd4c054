//! Strict tags: ids that increase across every server in real-time order (issue 45).
//!
//! A tag created with `"order": "strict"` ([`super::OrderMode::Strict`]) promises: **every id
//! handed out for the tag, by any server, is greater than every id whose answer was complete
//! before the request was sent.** Leaf's segments promise only a trend across servers; here one
//! server at a time serves the tag, and the others forward to it.
//!
//! - [`owner`]: the owner row (`leafid_strict_owner`) and the compare-and-set writes that move it.
//! - [`tag`]: one tag on one server: its ownership, its leased ranges, what it saw of the row.
//! - [`clock`]: the boot-time clock every lease is measured on.
//!
//! ## Why it holds
//! Let `L` be the lease (`segment.strict_lease_ms`) and `m = L / 10` the margin.
//!
//! 1. **One owner at a time, by the database's order.** Every write to the row is one
//!    compare-and-set statement: a takeover on the version the taker saw, a renewal or a
//!    release on the epoch and the server that hold the tag. Each bumps the version.
//! 2. **The owner stops first.** The owner reads its boot clock *before* sending a takeover or
//!    a renewal (`sent`); when the write succeeds its deadline becomes `sent + L - m`. It hands
//!    out an id only if a clock read *after* taking the id is before the deadline
//!    ([`tag::StrictTag::take`]).
//! 3. **The next owner waits.** Another server takes over only with a compare-and-set on a
//!    version it has read, unchanged, for `L + m` by its own boot clock, counted from a read
//!    that *returned* (so after the write that made that version committed, so after the
//!    owner's `sent`). A renewal in between moves the version and fails the takeover. So the
//!    takeover comes at least `L + m` after `sent`, by the taker's clock, and the old owner
//!    stopped at `sent + L - m` by its own. With both clocks' rates within 10% of real time
//!    (`m >= 0.1 L`; NTP slews a clock by at most 0.05%), the old owner stopped before the new
//!    one starts. A row without an owner (never held, or released by an owner that stopped
//!    serving first) is taken at once.
//! 4. **The new owner's ids are above the old one's.** After its takeover committed, the new
//!    owner leases a fresh range (`max_id = max_id + step`), above every range the database
//!    ever confirmed, and every id handed out came from such a range. A range leased under an
//!    older generation (before a loss) is dropped, never served ([`tag::Refused::Stale`]); a
//!    range at or below one leased before is refused ([`tag::Refused::Regressed`]).
//! 5. **Within one owner**, ids are taken under one mutex from increasing ranges, so a request
//!    that starts after another completed gets a larger id.
//!
//! The boot clock counts while a process is stopped (`SIGSTOP`) and while the machine sleeps,
//! and no wall-clock step moves it: neither the lease nor the proof reads a wall clock, the
//! database's included.
//!
//! **Not promised:** a server whose boot clock runs more than 10% slow or fast; a database that
//! loses a committed write (the durability gate refuses to lease from one known to).

pub mod clock;
pub mod owner;
pub mod tag;

use std::time::Duration;

pub use owner::{Claim, OwnerRow, OwnerStore};
pub use tag::{LeaseTicket, Ownership, Refused, Seen, StrictTag, Take};

/// The timing of strict tags, from the lease `L`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrictTiming {
    /// `L`: how long a successful write holds the tag.
    pub lease: Duration,
}

impl StrictTiming {
    /// The default lease: 2 s (a failover waits at most about `L + m` plus a renewal period).
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(2);

    /// Timing with lease `L` (at least 100 ms).
    pub fn new(lease: Duration) -> Self {
        Self {
            lease: lease.max(Duration::from_millis(100)),
        }
    }

    /// `m = L / 10`: covers two boot clocks whose rates differ from real time by up to 10%.
    pub fn margin(&self) -> Duration {
        self.lease / 10
    }

    /// How long the owner serves after a write's send time: `L - m`.
    pub fn hold(&self) -> Duration {
        self.lease - self.margin()
    }

    /// How long another server must see one version before it takes over: `L + m`.
    pub fn patience(&self) -> Duration {
        self.lease + self.margin()
    }

    /// The patience before taking over a tag whose row says its owner holds it for
    /// `owner_lease_ms`: the longer of this server's and the owner's, so a server configured
    /// with a shorter lease than the owner's still waits the owner's hold out.
    pub fn patience_for(&self, owner_lease_ms: u64) -> Duration {
        self.patience()
            .max(Self::new(Duration::from_millis(owner_lease_ms)).patience())
    }

    /// How often the owner renews: `L / 4`, so three renewals may fail before the hold ends.
    pub fn renew_every(&self) -> Duration {
        self.lease / 4
    }
}

impl Default for StrictTiming {
    fn default() -> Self {
        Self::new(Self::DEFAULT_LEASE)
    }
}
