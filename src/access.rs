//! Who may ask for what: one [`AccessPolicy`] for every transport.
//!
//! A transport presents the caller as [`Credentials`] (HTTP reads the `Authorization` header and
//! the peer address off the request; a CLI or gRPC door builds its own), and asks the policy
//! about an [`Action`]. The policy answers `Ok` or the refusal ([`Error::Unauthorized`]), so the
//! rules live here once: admin writes, monitor reads, taking a tag's ids, decoding a permuted
//! tag, reading a permuted tag's volume, taking a tag's ids. Caller tokens scoped to tags
//! ([`callers`]) answer [`Action::TakeIds`] and [`Action::Decode`]: the admin credential is no
//! caller token and a caller token no admin credential, but `admin.token` takes any tag's ids
//! (an operator debugging a tag needs no token of its own).
//!
//! Closed by default, whatever sits in front: an admin write needs the bearer token
//! `admin.token`. The peer address is not a credential: behind a same-host reverse proxy or a
//! service mesh sidecar every request arrives from 127.0.0.1, so "loopback may write" would open
//! the admin surface to whoever reaches the proxy. `admin.trust_loopback = true` restores that
//! rule for a box with no proxy on it. The monitor pages are open by default (Leaf's `/cache`
//! and `/db` are) and need the admin credential with `admin.protect_reads = true`.

pub mod callers;

use std::net::IpAddr;
use std::sync::Arc;

use crate::config::Secret;
use crate::error::Error;
use crate::service::quota::Caller;
use callers::Callers;

/// What a caller presents. Read lazily: an action that needs no credential reads nothing (the
/// id routes' hot path stays free of header lookups).
pub trait Credentials {
    /// The bearer token presented, if any (HTTP: `Authorization: Bearer <token>`).
    fn bearer(&self) -> Option<&str>;
    /// The peer's address, if the transport knows it.
    fn peer(&self) -> Option<IpAddr>;
    /// Whether the caller is the operator at the machine itself: the CLI, run with the
    /// database's credentials (and the key files) in hand, which no network caller can be.
    fn is_operator(&self) -> bool {
        false
    }
}

/// The operator's own command line (`leafid tags`, `leafid ids decode`): it reaches the
/// database directly, so the policy admits it to everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Operator;

impl Credentials for Operator {
    fn bearer(&self) -> Option<&str> {
        None
    }

    fn peer(&self) -> Option<IpAddr> {
        None
    }

    fn is_operator(&self) -> bool {
        true
    }
}

/// Credentials held as values: for a transport that has them at hand (the CLI, gRPC metadata,
/// tests).
#[derive(Debug, Clone, Default)]
pub struct Presented {
    /// The bearer token, if any.
    pub bearer: Option<String>,
    /// The peer's address, if known.
    pub peer: Option<IpAddr>,
}

impl Credentials for Presented {
    fn bearer(&self) -> Option<&str> {
        self.bearer.as_deref()
    }

    fn peer(&self) -> Option<IpAddr> {
        self.peer
    }
}

/// What a caller asks to do.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    /// Create, change or delete a tag.
    AdminWrite,
    /// Read the monitor pages and tag lists (`/cache`, `/db`, `GET /api/v1/tags`, `/metrics`).
    MonitorRead,
    /// Take ids of this tag (segment or formatted), or snowflake ids (`None`): the caller
    /// token's scope ([`callers`]).
    TakeIds(Option<&'a str>),
    /// Read an id of this (unpermuted formatted) tag back into its period and sequence: the
    /// tag's scope, as for its ids, or the admin credential.
    Decode(&'a str),
    /// Read a permuted tag's id back into its sequence (what the permutation hides).
    DecodePermuted(&'a str),
    /// Read a permuted tag's volume on a monitor read: its next id, leased `max_id`, buffer
    /// positions, issued totals and fill (`docs/shapes.md`: an observer without the key learns
    /// neither the order nor the volume). Asked once per monitor request; a caller refused it
    /// sees the page with those numbers left out, never an error.
    ReadVolume,
}

/// Who may do what: `[admin]` of the configuration.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    /// `admin.token`: the bearer token that admin requests carry.
    pub token: Option<Secret>,
    /// `admin.trust_loopback`: without a token, a loopback peer may use the admin surface.
    pub trust_loopback: bool,
    /// `admin.protect_reads`: the monitor pages need the same credential as writes.
    pub protect_reads: bool,
    /// `[callers]`: the caller tokens and the mode. `None` admits every id request (tools and
    /// tests that build a policy by hand; a server always has one).
    pub callers: Option<Arc<Callers>>,
}

impl AccessPolicy {
    /// `Ok` if `who` may do `action`, else the refusal naming the credential it needs.
    pub fn admit(&self, who: &dyn Credentials, action: Action<'_>) -> Result<(), Error> {
        match action {
            // First: the id routes' answer. Without a token presented, one header lookup and
            // one relaxed load (`Callers::admit`).
            Action::TakeIds(target) => self.admit_ids(who, target).map(|_| ()),
            _ if who.is_operator() => Ok(()),
            Action::Decode(tag) => match &self.callers {
                None => Ok(()),
                Some(c) => c
                    .admit(who, Some(tag), self.token.as_ref())
                    .map(|_| ())
                    .or_else(|e| self.admin(who, "").map_err(|_| e)),
            },
            Action::MonitorRead if !self.protect_reads => Ok(()),
            Action::MonitorRead => self.admin(
                who,
                "this page needs Authorization: Bearer <admin.token> (admin.protect_reads)",
            ),
            Action::AdminWrite | Action::DecodePermuted(_) | Action::ReadVolume => {
                self.admin(who, "admin writes need Authorization: Bearer <admin.token>")
            }
        }
    }

    /// [`Action::TakeIds`] of `target` (a tag; `None`: snowflake ids), with the caller whose
    /// quotas the request is charged to (`None`: no limits apply).
    #[inline]
    pub fn admit_ids(
        &self,
        who: &dyn Credentials,
        target: Option<&str>,
    ) -> Result<Option<Arc<Caller>>, Error> {
        match &self.callers {
            None => Ok(None),
            Some(c) => c.admit(who, target, self.token.as_ref()),
        }
    }

    /// The admin credential: the token when one is configured, else a loopback peer with
    /// `trust_loopback`, else nobody.
    fn admin(&self, who: &dyn Credentials, refusal: &'static str) -> Result<(), Error> {
        if let Some(token) = &self.token {
            let given = who.bearer().unwrap_or("");
            if constant_time_eq(given.as_bytes(), token.expose().as_bytes()) {
                return Ok(());
            }
            return Err(Error::Unauthorized(refusal));
        }
        if self.trust_loopback && who.peer().is_some_and(|a| a.is_loopback()) {
            return Ok(());
        }
        Err(Error::Unauthorized(
            "admin requests need admin.token (sent as Authorization: Bearer <token>); none is \
             configured. `leafid tags` manages tags on the database directly",
        ))
    }
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix (the
/// admin token here, a strict tag's peer key in `crate::service::strict`).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn who(bearer: Option<&str>, peer: [u8; 4]) -> Presented {
        Presented {
            bearer: bearer.map(str::to_owned),
            peer: Some(IpAddr::V4(Ipv4Addr::from(peer))),
        }
    }

    fn with_token(protect_reads: bool) -> AccessPolicy {
        AccessPolicy {
            token: Some(Secret::new("s3cret")),
            trust_loopback: true,
            protect_reads,
            callers: None,
        }
    }

    #[test]
    fn compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn with_a_token_only_the_token_admits_a_write_and_a_permuted_decode() {
        let p = with_token(false);
        for action in [
            Action::AdminWrite,
            Action::DecodePermuted("codes"),
            Action::ReadVolume,
        ] {
            assert!(p.admit(&who(Some("s3cret"), [10, 0, 0, 1]), action).is_ok());
            // Loopback is no credential once a token is set.
            let e = p.admit(&who(None, [127, 0, 0, 1]), action).unwrap_err();
            assert_eq!(e.code(), "unauthorized");
            assert!(
                p.admit(&who(Some("s3cre"), [127, 0, 0, 1]), action)
                    .is_err()
            );
        }
    }

    #[test]
    fn monitor_reads_are_open_unless_protected() {
        let anyone = who(None, [10, 0, 0, 1]);
        assert!(
            with_token(false)
                .admit(&anyone, Action::MonitorRead)
                .is_ok()
        );
        let e = with_token(true)
            .admit(&anyone, Action::MonitorRead)
            .unwrap_err();
        assert!(e.to_string().contains("protect_reads"), "{e}");
        assert!(
            with_token(true)
                .admit(&who(Some("s3cret"), [10, 0, 0, 1]), Action::MonitorRead)
                .is_ok()
        );
    }

    #[test]
    fn without_a_token_only_a_trusted_loopback_peer_writes() {
        let mut p = AccessPolicy::default();
        assert!(
            p.admit(&who(None, [127, 0, 0, 1]), Action::AdminWrite)
                .is_err()
        );
        p.trust_loopback = true;
        assert!(
            p.admit(&who(None, [127, 0, 0, 1]), Action::AdminWrite)
                .is_ok()
        );
        assert!(
            p.admit(&who(None, [192, 168, 0, 1]), Action::AdminWrite)
                .is_err()
        );
        assert!(p.admit(&Presented::default(), Action::AdminWrite).is_err());
    }

    #[test]
    fn the_operator_at_the_machine_is_admitted_to_everything() {
        let p = with_token(true);
        for action in [
            Action::AdminWrite,
            Action::MonitorRead,
            Action::DecodePermuted("codes"),
            Action::ReadVolume,
        ] {
            assert!(p.admit(&Operator, action).is_ok());
        }
    }

    /// Reads stay open by default; the volume of a permuted tag does not: a monitor-page reader
    /// without the admin credential (no token, a wrong one, a loopback peer without
    /// `trust_loopback`) is refused it.
    #[test]
    fn open_monitor_reads_do_not_open_a_permuted_tags_volume() {
        let p = with_token(false);
        let anyone = who(None, [10, 0, 0, 1]);
        assert!(p.admit(&anyone, Action::MonitorRead).is_ok());
        assert!(p.admit(&anyone, Action::ReadVolume).is_err());
        assert!(
            p.admit(&who(Some("wrong"), [10, 0, 0, 1]), Action::ReadVolume)
                .is_err()
        );
        let open = AccessPolicy::default();
        assert!(
            open.admit(&who(None, [127, 0, 0, 1]), Action::ReadVolume)
                .is_err()
        );
        let loopback = AccessPolicy {
            trust_loopback: true,
            ..AccessPolicy::default()
        };
        assert!(
            loopback
                .admit(&who(None, [127, 0, 0, 1]), Action::ReadVolume)
                .is_ok()
        );
    }

    /// With caller tokens required, a plain decode needs the tag's scope or the admin
    /// credential (here a trusted loopback peer); ids need a token or `admin.token`.
    #[test]
    fn a_decode_takes_the_tags_scope_or_the_admin_credential() {
        let callers = Callers::new(callers::CallerMode::Tokens, false);
        callers.install(&[]);
        let p = AccessPolicy {
            callers: Some(callers),
            ..with_token(false)
        };
        let stranger = who(None, [10, 0, 0, 1]);
        assert!(p.admit(&stranger, Action::Decode("t")).is_err());
        assert!(p.admit(&stranger, Action::TakeIds(Some("t"))).is_err());
        let admin = who(Some("s3cret"), [10, 0, 0, 1]);
        assert!(p.admit(&admin, Action::Decode("t")).is_ok());
        assert!(p.admit(&admin, Action::TakeIds(Some("t"))).is_ok());
        assert!(p.admit(&admin, Action::TakeIds(None)).is_ok());
        // Without `admin.token`, a trusted loopback peer decodes but takes no ids: ids need a
        // token (behind a same-host proxy every peer is loopback).
        let loopback = AccessPolicy {
            token: None,
            ..p.clone()
        };
        let local = who(None, [127, 0, 0, 1]);
        assert!(loopback.admit(&local, Action::Decode("t")).is_ok());
        assert!(loopback.admit(&local, Action::TakeIds(Some("t"))).is_err());
    }

    #[test]
    fn anyone_takes_ids() {
        let p = with_token(true);
        assert!(
            p.admit(&Presented::default(), Action::TakeIds(Some("t")))
                .is_ok()
        );
        assert!(
            p.admit(&Presented::default(), Action::TakeIds(None))
                .is_ok()
        );
    }
}
