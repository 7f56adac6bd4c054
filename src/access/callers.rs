//! Caller tokens: who may take ids of which tags (`Action::TakeIds`), and whether a server
//! without tokens is open at all (`callers.mode`).
//!
//! - A token is `lid_` and 43 characters of base64url: 32 bytes from the thread's CSPRNG
//!   ([`new_token`]). It is shown once, at creation; the database holds its SHA-256
//!   ([`hash_token`]), never the token.
//! - Its scope ([`Scopes`]): exact tag names, prefixes ending in `*` (`orders*`), `*` (every
//!   tag), and `snowflake` (snowflake ids; `*` does not cover them).
//! - [`Callers`] holds the unrevoked tokens of the server's own database in memory
//!   ([`TokenSet`]: SHA-256 -> name and scope), loaded at start, refreshed every
//!   `callers.refresh_secs` and at once after this server's own admin writes, and answers
//!   every id request: one hash and one map lookup for a request that presents a token, one
//!   relaxed load for one that presents none.
//!
//! **Open only by choice** ([`CallerMode`]): `tokens` always requires a token; `open` never
//! does (a presented token is still checked: a wrong credential is a caller's bug worth
//! surfacing); `auto` (the default) requires one as soon as the database holds any unrevoked
//! token, and on a server bound beyond loopback always. Tokens required but never loaded (the
//! database was down at start): `not_ready`, never open.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use base64::Engine as _;
use prometheus::{IntCounter, IntCounterVec, Opts};
use sha2::{Digest, Sha256};

use super::Credentials;
use crate::config::Secret;
use crate::error::Error;
use crate::segment::{BizTag, StoreError};
use crate::service::quota::{Caller, Limits};
use crate::shapes::format::Share;
use crate::store::tokens::{CallerTokenRow, CallerTokenStore};
use crate::telemetry::LogLimiter;

/// The prefix of every caller token: a token found in a log or a paste is recognisable.
pub const TOKEN_PREFIX: &str = "lid_";

/// Most scope entries one token holds.
pub const MAX_SCOPES: usize = 64;

/// Longest token name.
pub const MAX_NAME_LEN: usize = 64;

/// The scope entry that grants snowflake ids.
pub const SNOWFLAKE_SCOPE: &str = "snowflake";

/// Most token names with a series of their own in `leafid_caller_requests_total`; the rest
/// share [`OTHER_LABEL`].
pub const MAX_NAME_LABELS: usize = 1_000;

/// The label of the tokens past [`MAX_NAME_LABELS`] (`~` is no name's character).
pub const OTHER_LABEL: &str = "~other";

/// How often `callers.mode = "open"` on a server bound beyond loopback is logged again.
pub const OPEN_WARN_INTERVAL: Duration = Duration::from_secs(600);

pub use crate::config::CallerMode;

/// A new caller token: [`TOKEN_PREFIX`] and 32 bytes from the thread's CSPRNG (ChaCha, seeded
/// from the OS) as 43 characters of unpadded base64url.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// SHA-256 of a presented token: the key of [`TokenSet`] and, in hex, `token_hash`.
pub fn hash_token(token: &str) -> [u8; 32] {
    hash_bytes(token.as_bytes())
}

/// Lowercase hex of a hash.
pub fn hex(hash: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    hash.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The hash of a stored `token_hash`, `None` if it is not 64 hex digits.
fn unhex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// Checks a token name: 1 to [`MAX_NAME_LEN`] of `[A-Za-z0-9._-]`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_NAME_LEN
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "a token name is 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9._-] (got {:?})",
            crate::telemetry::ClientText(name).to_string()
        ));
    }
    Ok(())
}

/// One scope entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    /// Exactly this tag.
    Tag(String),
    /// Every tag starting with this (`orders*`); `*` is the empty prefix.
    Prefix(String),
    /// Snowflake ids.
    Snowflake,
}

/// What a token may take ids of: its scope entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes(Vec<Scope>);

impl Scopes {
    /// The entries as given at creation, checked: 1 to [`MAX_SCOPES`] entries, each a tag
    /// name (the tag rule), a tag name's start followed by `*`, `*`, or `snowflake`.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        if entries.is_empty() || entries.len() > MAX_SCOPES {
            return Err(format!(
                "tags holds 1 to {MAX_SCOPES} entries (got {})",
                entries.len()
            ));
        }
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            out.push(Self::entry(e.as_ref())?);
        }
        Ok(Self(out))
    }

    fn entry(e: &str) -> Result<Scope, String> {
        if e == SNOWFLAKE_SCOPE {
            return Ok(Scope::Snowflake);
        }
        let (body, prefix) = match e.strip_suffix('*') {
            Some(body) => (body, true),
            None => (e, false),
        };
        if prefix && body.is_empty() {
            return Ok(Scope::Prefix(String::new()));
        }
        BizTag::validate(body).map_err(|err| {
            format!(
                "tags entry {:?}: {err} (an entry is a tag, a tag's start followed by *, *, or \
                 snowflake)",
                crate::telemetry::ClientText(e).to_string()
            )
        })?;
        Ok(if prefix {
            Scope::Prefix(body.to_owned())
        } else {
            Scope::Tag(body.to_owned())
        })
    }

    /// The scope of a stored row (`,`-joined entries); an entry that no longer passes the
    /// rule is left out (narrower, never wider).
    pub fn from_stored(text: &str) -> Self {
        Self(
            text.split(',')
                .filter_map(|e| Self::entry(e.trim()).ok())
                .collect(),
        )
    }

    /// The entries as written.
    pub fn entries(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|s| match s {
                Scope::Tag(t) => t.clone(),
                Scope::Prefix(p) => format!("{p}*"),
                Scope::Snowflake => SNOWFLAKE_SCOPE.to_owned(),
            })
            .collect()
    }

    /// The form stored in `tags`.
    pub fn to_stored(&self) -> String {
        self.entries().join(",")
    }

    /// Whether the scope covers `target`: a tag, or snowflake ids (`None`). Tags compare
    /// exactly (bytewise), as the engine's tag map does.
    pub fn covers(&self, target: Option<&str>) -> bool {
        self.0.iter().any(|s| match (s, target) {
            (Scope::Snowflake, None) => true,
            (Scope::Tag(t), Some(tag)) => t == tag,
            (Scope::Prefix(p), Some(tag)) => tag.starts_with(p.as_str()),
            _ => false,
        })
    }
}

/// One unrevoked token as the check needs it.
#[derive(Debug)]
struct Entry {
    name: Arc<str>,
    scopes: Scopes,
    /// The token's limits, when it has any (`crate::service::quota`).
    caller: Option<Arc<Caller>>,
    /// Its series of `leafid_caller_requests_total`.
    taken: IntCounter,
}

/// The unrevoked tokens of the database, by SHA-256.
#[derive(Debug, Default)]
pub struct TokenSet {
    by_hash: HashMap<[u8; 32], Arc<Entry>>,
    /// Unique in the process for every set installed: what a thread's [`Verified`] cache is
    /// valid for.
    generation: u64,
}

/// Tokens a worker thread verified recently, so that a caller's next request costs a
/// constant-time compare instead of a SHA-256 (about 5,400 instructions without SHA
/// extensions). Valid for one set's generation only: a new set (a revocation, a refresh)
/// empties it at the next request, so a revoked token is never admitted from here. It holds the
/// plain tokens of the last few callers of this thread, as the request buffers did a moment
/// before; only tokens found in the set are kept, so made-up tokens always pay the hash.
struct Verified {
    generation: u64,
    slots: [Option<Remembered>; VERIFIED_SLOTS],
    next: usize,
}

/// A token a thread verified, and its entry.
type Remembered = (Box<[u8]>, Arc<Entry>);

/// Tokens each worker thread remembers.
const VERIFIED_SLOTS: usize = 4;

thread_local! {
    static VERIFIED: std::cell::RefCell<Verified> = const {
        std::cell::RefCell::new(Verified {
            generation: 0,
            slots: [None, None, None, None],
            next: 0,
        })
    };
}

/// Calls `f` with the entry of `token` in `set`: from this thread's [`Verified`] cache when it
/// holds it (compared in constant time, each slot), else by SHA-256 and the map (then
/// remembered).
fn with_entry<R>(set: &TokenSet, token: &str, f: impl FnOnce(Option<&Entry>) -> R) -> R {
    let token = token.as_bytes();
    VERIFIED.with(|cell| {
        let Ok(mut v) = cell.try_borrow_mut() else {
            // Re-entered (cannot happen: `f` does not admit): no cache.
            return f(set.by_hash.get(&hash_bytes(token)).map(|e| &**e));
        };
        if v.generation != set.generation {
            v.generation = set.generation;
            v.slots = [None, None, None, None];
            v.next = 0;
        }
        let hit = v.slots.iter().position(|slot| {
            slot.as_ref()
                .is_some_and(|(t, _)| super::constant_time_eq(t, token))
        });
        if let Some(i) = hit {
            let entry = v.slots[i].as_ref().map(|(_, e)| e.clone());
            drop(v);
            return f(entry.as_deref());
        }
        match set.by_hash.get(&hash_bytes(token)) {
            Some(entry) => {
                let i = v.next;
                v.slots[i] = Some((token.into(), entry.clone()));
                v.next = (i + 1) % VERIFIED_SLOTS;
                drop(v);
                f(Some(entry))
            }
            None => {
                drop(v);
                f(None)
            }
        }
    })
}

fn hash_bytes(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Every installed set's generation, unique in the process (several servers in one test
/// process share the thread-local cache).
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl TokenSet {
    /// How many tokens admit.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether no token admits.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// What an anonymous request gets, kept beside the set so that it costs one relaxed load.
const ANON_ADMITTED: u8 = 0;
const ANON_REFUSED: u8 = 1;
const ANON_NOT_LOADED: u8 = 2;

/// The refusal of an anonymous request where tokens are required.
const NEEDS_TOKEN: &str = "this server requires a caller token: send Authorization: Bearer \
    <token> (Leaf's two routes also take ?access_token=<token>); an admin creates one with \
    `leafid tokens create NAME --tags TAGS` or POST /api/v1/tokens";

/// The refusal of an anonymous request on a server bound beyond loopback with no choice made.
const BEYOND_LOOPBACK: &str = "this server is bound beyond loopback and serves ids only to \
    callers with a token: create one (`leafid tokens create NAME --tags TAGS`, or POST \
    /api/v1/tokens) and send it as Authorization: Bearer <token>, or set callers.mode = \"open\" \
    to serve anonymous callers";

/// The refusal of a token that is not (or no longer) in the set.
const UNKNOWN_TOKEN: &str = "the caller token presented is unknown or revoked";

/// The caller-token check of one server: its mode, its set, its counters.
pub struct Callers {
    mode: CallerMode,
    beyond_loopback: bool,
    /// `None` until the first load.
    set: ArcSwapOption<TokenSet>,
    /// What an anonymous request gets now (`ANON_*`), updated with the set. Relaxed: a
    /// request that reads the value before a concurrent load answers as if it came first.
    anonymous: AtomicU8,
    /// `leafid_caller_requests_total`.
    taken: IntCounterVec,
    /// Names with a series of their own, and the shared series past the cap.
    labels: Mutex<HashMap<Arc<str>, IntCounter>>,
    /// `leafid_caller_refused_total`.
    refused: IntCounterVec,
    refused_unauthenticated: IntCounter,
    refused_forbidden: IntCounter,
    /// One warning per cause per interval (refusals: the repeated-failure interval).
    open_warning: LogLimiter,
}

impl std::fmt::Debug for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callers")
            .field("mode", &self.mode)
            .field("beyond_loopback", &self.beyond_loopback)
            .finish_non_exhaustive()
    }
}

impl Callers {
    /// The check of a server in `mode`, bound beyond loopback or not; nothing loaded yet.
    pub fn new(mode: CallerMode, beyond_loopback: bool) -> Arc<Self> {
        let taken = IntCounterVec::new(
            Opts::new(
                "leafid_caller_requests_total",
                "Id requests admitted by a caller token, by token name (at most 1000 names; the \
                 rest under ~other)",
            ),
            &["token"],
        )
        .expect("valid metric");
        let refused = IntCounterVec::new(
            Opts::new(
                "leafid_caller_refused_total",
                "Id requests refused: unauthenticated (401) or forbidden (403)",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let me = Self {
            mode,
            beyond_loopback,
            set: ArcSwapOption::empty(),
            anonymous: AtomicU8::new(ANON_NOT_LOADED),
            refused_unauthenticated: refused.with_label_values(&["unauthenticated"]),
            refused_forbidden: refused.with_label_values(&["forbidden"]),
            taken,
            labels: Mutex::new(HashMap::new()),
            refused,
            open_warning: LogLimiter::new(OPEN_WARN_INTERVAL),
        };
        me.anonymous
            .store(me.anonymous_for(None), Ordering::Relaxed);
        Arc::new(me)
    }

    /// The mode.
    pub fn mode(&self) -> CallerMode {
        self.mode
    }

    /// The metric families, for the server's registry.
    pub fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 2] {
        [Box::new(self.taken.clone()), Box::new(self.refused.clone())]
    }

    /// What an anonymous request gets with `set` loaded (`None`: never loaded).
    fn anonymous_for(&self, set: Option<&TokenSet>) -> u8 {
        match self.mode {
            CallerMode::Open => ANON_ADMITTED,
            CallerMode::Tokens => ANON_REFUSED,
            CallerMode::Auto if self.beyond_loopback => ANON_REFUSED,
            // On loopback with the set unknown (the database down at start): open, as a
            // loopback server with no token is, so a restart during an outage still serves
            // what it can (snowflake ids from its worker cache). A server that must never be
            // open sets `callers.mode = "tokens"` (or binds beyond loopback): closed until read.
            CallerMode::Auto => match set {
                None => ANON_ADMITTED,
                Some(s) if s.is_empty() => ANON_ADMITTED,
                Some(_) => ANON_REFUSED,
            },
        }
    }

    /// Whether anonymous id requests are refused now (for the start-up line and docs).
    pub fn requires_token(&self) -> bool {
        self.anonymous.load(Ordering::Relaxed) != ANON_ADMITTED
    }

    /// Replaces the set with the unrevoked rows of `rows`. A row whose hash is not 64 hex
    /// digits (written by hand) is left out: it admits nobody.
    pub fn install(&self, rows: &[CallerTokenRow]) {
        let mut by_hash = HashMap::new();
        let mut labels = self.labels.lock().unwrap_or_else(|e| e.into_inner());
        for row in rows.iter().filter(|r| r.revoked_at_ms.is_none()) {
            let Some(hash) = unhex(&row.token_hash) else {
                continue;
            };
            let name: Arc<str> = Arc::from(row.name.as_str());
            let taken = match labels.get(&name) {
                Some(c) => c.clone(),
                None if labels.len() < MAX_NAME_LABELS => {
                    let c = self.taken.with_label_values(&[&*name]);
                    labels.insert(name.clone(), c.clone());
                    c
                }
                None => self.taken.with_label_values(&[OTHER_LABEL]),
            };
            by_hash.insert(
                hash,
                Arc::new(Entry {
                    caller: Caller::limited(name.clone(), limits_of(row)),
                    name,
                    scopes: Scopes::from_stored(&row.tags),
                    taken,
                }),
            );
        }
        drop(labels);
        let set = TokenSet {
            by_hash,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        };
        self.anonymous
            .store(self.anonymous_for(Some(&set)), Ordering::Relaxed);
        self.set.store(Some(Arc::new(set)));
    }

    /// Reads the tokens from `store` and installs them; how many admit.
    pub async fn reload(&self, store: &dyn CallerTokenStore) -> Result<usize, StoreError> {
        let rows = store.list_tokens().await?;
        self.install(&rows);
        Ok(self.set.load().as_ref().map_or(0, |s| s.len()))
    }

    /// Reloads every `every` until `stop`; a failed reload keeps the last set (logged once per
    /// interval). With `callers.mode = "open"` beyond loopback, says so again each
    /// [`OPEN_WARN_INTERVAL`].
    pub async fn refresh_every(
        self: Arc<Self>,
        store: Arc<dyn CallerTokenStore>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.reload(&*store).await
                && let Some(held_back) = LogLimiter::global().allow("caller tokens not reloaded")
            {
                tracing::warn!(error = %e, held_back, "caller tokens not reloaded: the last set stays in force");
            }
            self.warn_if_open();
        }
    }

    /// The warning of `callers.mode = "open"` on a server bound beyond loopback, at most once
    /// per [`OPEN_WARN_INTERVAL`]; `true` if it was logged.
    pub fn warn_if_open(&self) -> bool {
        if self.mode != CallerMode::Open || !self.beyond_loopback {
            return false;
        }
        if self.open_warning.allow("callers open").is_none() {
            return false;
        }
        tracing::warn!(
            "callers.mode = \"open\" on a server bound beyond loopback: anyone who reaches its \
             port takes ids of every tag without a token"
        );
        true
    }

    /// Admits `who` to take ids of `target` (a tag; `None`: snowflake ids), or refuses:
    /// `unauthorized` (no token where one is required, or one that is unknown or revoked),
    /// `forbidden` (a token not scoped to the target), `not_ready` (tokens may be required and
    /// were never loaded). `admin` is `admin.token`: the admin credential takes any tag's ids,
    /// so an operator can debug with it; it is compared only after the set misses.
    ///
    /// Admitted by a token with limits: `Some(caller)`, whose quotas the service charges.
    pub fn admit(
        &self,
        who: &dyn Credentials,
        target: Option<&str>,
        admin: Option<&Secret>,
    ) -> Result<Option<Arc<Caller>>, Error> {
        let Some(token) = who.bearer() else {
            // No hashing, one relaxed load: the open server's hot path.
            return match self.anonymous.load(Ordering::Relaxed) {
                ANON_ADMITTED => Ok(None),
                _ if who.is_operator() => Ok(None),
                ANON_NOT_LOADED => Err(not_loaded()),
                _ => {
                    let why = if self.mode == CallerMode::Auto && self.beyond_loopback {
                        BEYOND_LOOPBACK
                    } else {
                        NEEDS_TOKEN
                    };
                    Err(self.unauthenticated(why))
                }
            };
        };
        let set = self.set.load();
        // The map lookup is not constant-time, and need not be: the key is the SHA-256 of the
        // presented token, so what its timing could reveal is how a hash the caller chose
        // compares with stored hashes, and learning a stored hash gives no token (a preimage of
        // SHA-256 over 256 random bits). The thread's cache of verified tokens compares in
        // constant time; the admin token, a plain secret, too (below).
        let verdict = set.as_ref().and_then(|s| {
            with_entry(s, token, |entry| {
                entry.map(|entry| {
                    if entry.scopes.covers(target) {
                        entry.taken.inc();
                        return Ok(entry.caller.clone());
                    }
                    self.refused_forbidden.inc();
                    let e = Error::Forbidden {
                        token: entry.name.to_string(),
                        target: target
                            .map_or_else(|| "snowflake ids".to_owned(), |t| format!("{t:?}")),
                    };
                    log_refusal("caller refused: forbidden", &e);
                    Err(e)
                })
            })
        });
        if let Some(verdict) = verdict {
            return verdict;
        }
        if let Some(admin) = admin
            && super::constant_time_eq(token.as_bytes(), admin.expose().as_bytes())
        {
            return Ok(None);
        }
        if set.is_none() {
            // Unknown tokens on an open-until-read server are admitted like no token.
            return match self.anonymous.load(Ordering::Relaxed) {
                ANON_ADMITTED => Ok(None),
                _ => Err(not_loaded()),
            };
        }
        Err(self.unauthenticated(UNKNOWN_TOKEN))
    }

    fn unauthenticated(&self, why: &'static str) -> Error {
        self.refused_unauthenticated.inc();
        let e = Error::Unauthorized(why);
        log_refusal("caller refused: unauthenticated", &e);
        e
    }
}

/// A row's limits, as the quotas read them (a negative value, written by hand, is no limit).
fn limits_of(row: &CallerTokenRow) -> Limits {
    let positive = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok()).filter(|v| *v > 0);
    Limits {
        rate_per_sec: positive(row.rate_per_sec),
        burst: positive(row.burst),
        period_share: row
            .period_share_ppm
            .and_then(|p| u32::try_from(p).ok())
            .and_then(Share::from_ppm),
    }
}

/// Tokens may be required and were never read: closed, with a retry.
fn not_loaded() -> Error {
    Error::NotReady(
        "caller tokens are not loaded yet (the database was unreachable): id requests are \
         refused until they are"
            .to_owned(),
    )
}

/// A refusal, logged once per cause per repeated-failure interval, never per request; never
/// the token.
fn log_refusal(cause: &'static str, e: &Error) {
    if let Some(held_back) = LogLimiter::global().allow(cause) {
        tracing::warn!(code = e.code(), held_back, "{cause}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Presented;

    fn row(name: &str, token: &str, tags: &str) -> CallerTokenRow {
        CallerTokenRow {
            name: name.to_owned(),
            token_hash: hex(&hash_token(token)),
            tags: tags.to_owned(),
            rate_per_sec: None,
            burst: None,
            period_share_ppm: None,
            created_at_ms: 1,
            revoked_at_ms: None,
        }
    }

    fn bearer(t: &str) -> Presented {
        Presented {
            bearer: Some(t.to_owned()),
            peer: None,
        }
    }

    #[test]
    fn a_token_is_the_prefix_and_43_base64url_characters_never_twice() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        for t in [&a, &b] {
            let body = t.strip_prefix(TOKEN_PREFIX).unwrap();
            assert_eq!(body.len(), 43, "{t}");
            assert!(
                body.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            );
        }
        assert_eq!(unhex(&hex(&hash_token(&a))), Some(hash_token(&a)));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"g".repeat(64)), None);
    }

    #[test]
    fn scopes_match_names_exactly_prefixes_by_start_and_snowflake_alone() {
        let s = Scopes::parse(&["pay*", "orders", "snowflake"]).unwrap();
        assert!(s.covers(Some("pay_x")));
        assert!(s.covers(Some("pay")));
        assert!(s.covers(Some("orders")));
        assert!(!s.covers(Some("orders2")));
        assert!(!s.covers(Some("Orders")));
        assert!(!s.covers(Some("xpay")));
        assert!(s.covers(None));
        let all = Scopes::parse(&["*"]).unwrap();
        assert!(all.covers(Some("anything")));
        assert!(!all.covers(None), "* is every tag, not snowflake ids");
        assert_eq!(s.to_stored(), "pay*,orders,snowflake");
        assert_eq!(Scopes::from_stored(&s.to_stored()), s);
    }

    #[test]
    fn scope_entries_follow_the_tag_rule_and_are_bounded() {
        for bad in ["", "a b", "pay**", "*pay", "a,b", "x/y", &"a".repeat(129)] {
            assert!(Scopes::parse(&[bad]).is_err(), "{bad:?}");
        }
        let none: [&str; 0] = [];
        assert!(Scopes::parse(&none).is_err());
        let many: Vec<String> = (0..=MAX_SCOPES).map(|i| format!("t{i}")).collect();
        assert!(Scopes::parse(&many).is_err());
        assert!(Scopes::parse(&many[..MAX_SCOPES]).is_ok());
        // A stored entry broken by hand narrows the scope, never widens it.
        assert!(!Scopes::from_stored("a b,*x").covers(Some("a b")));
    }

    #[test]
    fn names_are_bounded_and_plain() {
        assert!(check_name("team-pay_1.v2").is_ok());
        for bad in ["", "a b", "ä", "x/y", "~other", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn auto_on_loopback_is_open_until_a_token_exists() {
        let c = Callers::new(CallerMode::Auto, false);
        let anyone = Presented::default();
        // Never loaded (the database down at start): open, as on loopback with no token, and
        // a token it cannot check is admitted like none; `tokens` mode stays closed.
        assert!(c.admit(&anyone, Some("t"), None).is_ok());
        assert!(c.admit(&bearer("lid_nope"), Some("t"), None).is_ok());
        let strict = Callers::new(CallerMode::Tokens, false);
        assert_eq!(
            strict.admit(&anyone, Some("t"), None).unwrap_err().code(),
            "unauthorized"
        );
        assert_eq!(
            strict
                .admit(&bearer("lid_nope"), Some("t"), None)
                .unwrap_err()
                .code(),
            "not_ready"
        );
        c.install(&[]);
        assert!(c.admit(&anyone, Some("t"), None).is_ok());
        // A wrong token is refused even while anonymous callers are admitted.
        assert_eq!(
            c.admit(&bearer("lid_nope"), Some("t"), None)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        c.install(&[row("pay", "lid_pay", "pay*")]);
        assert_eq!(
            c.admit(&anyone, Some("t"), None).unwrap_err().code(),
            "unauthorized"
        );
        assert!(c.admit(&bearer("lid_pay"), Some("pay_x"), None).is_ok());
        let e = c
            .admit(&bearer("lid_pay"), Some("orders"), None)
            .unwrap_err();
        assert_eq!(e.code(), "forbidden");
        assert!(e.to_string().contains("\"pay\"") && !e.to_string().contains("lid_pay"));
        // Revoked (installed without it): unknown, and anonymous callers are admitted again.
        let mut revoked = row("pay", "lid_pay", "pay*");
        revoked.revoked_at_ms = Some(2);
        c.install(&[revoked]);
        assert_eq!(
            c.admit(&bearer("lid_pay"), Some("pay_x"), None)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        assert!(c.admit(&anyone, Some("t"), None).is_ok());
    }

    #[test]
    fn beyond_loopback_auto_refuses_anonymous_callers_and_says_how_to_open() {
        let c = Callers::new(CallerMode::Auto, true);
        c.install(&[]);
        let e = c.admit(&Presented::default(), Some("t"), None).unwrap_err();
        assert_eq!(e.code(), "unauthorized");
        assert!(e.to_string().contains("callers.mode = \"open\""), "{e}");
        // Refused before any load too: no need to know the set to refuse.
        let fresh = Callers::new(CallerMode::Auto, true);
        assert_eq!(
            fresh
                .admit(&Presented::default(), None, None)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
        // The operator at the machine is no network caller.
        assert!(c.admit(&super::super::Operator, Some("t"), None).is_ok());
    }

    #[test]
    fn open_and_tokens_modes_do_what_they_say() {
        let open = Callers::new(CallerMode::Open, true);
        assert!(open.admit(&Presented::default(), Some("t"), None).is_ok());
        assert!(open.warn_if_open());
        assert!(!open.warn_if_open(), "once per interval");
        let tokens = Callers::new(CallerMode::Tokens, false);
        tokens.install(&[]);
        assert_eq!(
            tokens
                .admit(&Presented::default(), Some("t"), None)
                .unwrap_err()
                .code(),
            "unauthorized"
        );
    }

    #[test]
    fn the_admin_token_takes_any_tag_and_snowflake_ids() {
        let c = Callers::new(CallerMode::Tokens, false);
        let admin = Secret::new("adm1n");
        // Before any load too: the admin credential needs no set.
        assert!(c.admit(&bearer("adm1n"), Some("x"), Some(&admin)).is_ok());
        c.install(&[row("pay", "lid_pay", "pay*")]);
        assert!(
            c.admit(&bearer("adm1n"), Some("orders"), Some(&admin))
                .is_ok()
        );
        assert!(c.admit(&bearer("adm1n"), None, Some(&admin)).is_ok());
        assert!(c.admit(&bearer("adm1"), None, Some(&admin)).is_err());
        // A caller token is no admin token.
        assert!(c.admit(&bearer("lid_pay"), None, Some(&admin)).is_err());
    }

    /// The thread's cache of verified tokens: more callers than slots all admitted, a token
    /// differing in its last character never admitted from it, a new set (a revocation)
    /// empties it, and another server's set in the same thread is not read from it.
    #[test]
    fn verified_tokens_are_remembered_only_for_their_set() {
        let c = Callers::new(CallerMode::Tokens, false);
        let rows: Vec<_> = (0..VERIFIED_SLOTS + 2)
            .map(|i| row(&format!("t{i}"), &format!("lid_token{i}"), "x"))
            .collect();
        c.install(&rows);
        for _ in 0..3 {
            for i in 0..VERIFIED_SLOTS + 2 {
                assert!(
                    c.admit(&bearer(&format!("lid_token{i}")), Some("x"), None)
                        .is_ok()
                );
                let near = format!("lid_token{i}!");
                assert!(c.admit(&bearer(&near), Some("x"), None).is_err());
                assert_eq!(
                    c.admit(&bearer(&format!("lid_token{i}")), Some("y"), None)
                        .unwrap_err()
                        .code(),
                    "forbidden"
                );
            }
        }
        let other = Callers::new(CallerMode::Tokens, false);
        other.install(&[]);
        assert!(other.admit(&bearer("lid_token0"), Some("x"), None).is_err());
        assert!(c.admit(&bearer("lid_token0"), Some("x"), None).is_ok());
        let mut revoked = rows.clone();
        revoked[0].revoked_at_ms = Some(1);
        c.install(&revoked);
        assert!(c.admit(&bearer("lid_token0"), Some("x"), None).is_err());
        assert!(c.admit(&bearer("lid_token1"), Some("x"), None).is_ok());
    }

    #[test]
    fn labels_are_capped() {
        let c = Callers::new(CallerMode::Tokens, false);
        let rows: Vec<_> = (0..MAX_NAME_LABELS + 5)
            .map(|i| row(&format!("t{i}"), &format!("lid_{i}"), "*"))
            .collect();
        c.install(&rows);
        for i in 0..MAX_NAME_LABELS + 5 {
            c.admit(&bearer(&format!("lid_{i}")), Some("x"), None)
                .unwrap();
        }
        let families = prometheus::core::Collector::collect(&c.taken);
        let series = families[0].get_metric();
        assert_eq!(series.len(), MAX_NAME_LABELS + 1);
        let other = series
            .iter()
            .find(|m| m.get_label()[0].value() == OTHER_LABEL)
            .unwrap();
        assert_eq!(other.get_counter().get_value(), 5.0);
    }
}
