//! `Formatted`: the supply of a formatted tag (PROTOCOL.md, "Formatted tags"): ids that are
//! text (`ORD-2026112700000123`), fetched from the list route
//! `GET /api/v1/segment/{tag}/ids?count=N` with the end of their period, double-buffered like
//! the numeric supplies, through the same server list, failover, sizing and counters.
//!
//! # Invariants
//!
//! - **Only received texts, none twice.** A batch comes only from a 200 body that passed
//!   [`validate`]; its texts sit in one buffer (`TextList`, see `text.rs`). With the default
//!   clock the batch is installed once in the lock-free cursor (`textcursor.rs`), whose tickets
//!   map one to one onto its texts (one `fetch_add` each: no ticket twice); with an injected
//!   clock the batch's `next` index passes each text once, under the supply's lock (it only
//!   grows). Each is copied out as a [`FormattedId`]. A text a `FormattedId` cannot hold (longer than
//!   [`MAX_FORMATTED_LEN`], which a leafid format reaches only with more than 35 separators in
//!   its date part: `text.rs`) makes the whole answer that server's failure: no text is ever
//!   cut short.
//! - **Increasing (byte order).** Texts of one format sort as byte strings in issue order
//!   (`docs/shapes.md`). Every accepted batch is cut to the texts above the *floor* (the
//!   largest text accepted so far); the texts cut count in `discarded_ids`; an answer cut to
//!   nothing is followed at once by a request for twice the size. Batches are handed
//!   out in the order they were accepted, each text by a ticket of the cursor (the proof is in
//!   `textcursor.rs`: a later `fetch_add` gets a later ticket of the same batch or a later
//!   batch) or under the lock, so a call that starts after another returned gets a larger
//!   text.
//! - **Permuted tags: no order.** An answer with `"ordered": false` (a permuted tag,
//!   `T-9F3K2Q`) is in no order on purpose: it is taken without the byte-order check and
//!   without the floor, and handed out in the order received. No text twice still holds
//!   locally (each index of its batch is passed once); across batches and clients it is the
//!   server's guarantee, as for every id. The period rule applies as above. The local path is
//!   the same for both kinds: the flag is read once per answer, in `State::accept`.
//! - **Never yesterday's number today.** Before a text is handed out, its batch's period is
//!   checked: a batch whose period has ended is dropped whole, its texts counted in
//!   `discarded_ids`. A batch received already ended by the client's wall clock is dropped the
//!   same way, and the refill asks again after a backoff. With an injected
//!   [`clock`](crate::ClientBuilder::clock) the check is that clock, read per text, against
//!   `period_end` (tests move a period's end with it). With the default clock no clock is read
//!   per text (issue 47: a clock read is a system call where the VM's vDSO falls back to it,
//!   about 110 ns on the bench machine against a few ns for the rest of the path): at receipt
//!   the batch's deadline is `period_end - SystemTime::now()` on the monotonic clock, and a
//!   timer (a task on the client's runtime; a thread for a fixed supply) sets the batch's
//!   `ended` flag then (and the cursor's ended word of the batch's number, `textcursor.rs`);
//!   the local path loads it after claiming a text and before handing it out. **Bound**: the
//!   flag is set at most the timer's latency (tokio's 1 ms wheel plus scheduling) after
//!   `period_end` by the wall clock as it ran at receipt, and every take checks it (Acquire)
//!   after its claim, so no text is handed out by a take that checks after that; a take that
//!   claimed a text of an ended batch drops it (counted in `discarded_ids`), and the batch
//!   leaves the cursor under the lock, its unclaimed texts counted too. A wall clock stepped forward by D after receipt is not seen by the timer:
//!   texts may be handed out up to D after `period_end` by the stepped clock, until the next
//!   batch promotion (which reads the wall clock) or the next answer (each answer's deadline is
//!   computed from the wall clock read at its receipt). A clock stepped back only makes the
//!   flag fire early (texts dropped, never late). The server never issues texts of an ended
//!   period; this check is the client's second guard, for texts held across a period's end.
//!
//! The local path, with the default clock, is lock-free (issue 47: the mutex's two locked
//! instructions per text kept it at 0.24x of the numeric path): one `fetch_add` on the cursor's
//! state word claims a text of the installed batch, and the 32 bytes at its entry (its length and a
//! text of up to 31 bytes), read out of the batch's buffer of atomic words under the seqlock of the
//! batch's fields beside the state word, become the caller's [`FormattedId`], after the ended check
//! (`textcursor.rs`'s `take_head`). No lock, no allocation, nothing for the caller to free. A batch
//! with a longer text (a heap `FormattedId`), an ended batch or a reused slot finish the same claim
//! with the whole entry's read (`read`). The slow part (a batch spent or ended, the next one
//! installed, the preload's refill started, a take whose slot was reused answered from the
//! `history` of recent batches or counted as discarded) is under the supply's std mutex (never held
//! across an await). With an injected clock the local path is a step through the batch's list under
//! that mutex (a clock read, an increment of `next` and the copy).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Fault, ServerFault};
use crate::servers::{Answer, FetchError, Outcome, Request, Servers, Timing, backoff};
use crate::sizing::{Sizing, Usage};
use crate::supply::SupplyStats;
use crate::text::{FormattedId, IdWindow, MAX_FORMATTED_LEN, TextList};
use crate::textcursor::{Fast, LIMIT, Take, TextCursor, WindowSink};

/// A deadline this far off is never armed on a thread of its own (a fixed supply's period that
/// never ends in practice).
const NEVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Batches kept for a take whose slot was reused before it read it (`Recent`): at most this
/// many, and
const HISTORY: usize = 1024;
/// at most this many bytes of their texts (the newest one kept whatever its size).
const HISTORY_BYTES: usize = 4 << 20;

/// Most texts one request may ask for (the list route's limit).
pub const MAX_FORMATTED_BATCH: usize = 100_000;

/// A wall clock: what [`ClientBuilder::clock`](crate::ClientBuilder::clock) takes for the
/// formatted supplies' period rule (the system clock unless one is given).
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The wall clock a formatted supply checks periods against: the builder's, else
/// `SystemTime::now` (no indirect call then).
#[derive(Clone)]
pub(crate) struct Clock(pub(crate) Option<WallClock>);

impl Clock {
    #[inline]
    fn now(&self) -> SystemTime {
        match &self.0 {
            None => SystemTime::now(),
            Some(f) => f(),
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Clock(injected)"
        } else {
            "Clock(SystemTime::now)"
        })
    }
}

/// One valid answer of the list route.
#[derive(Debug)]
pub(crate) struct Texts {
    /// The texts in the order received, in one buffer (`TextList`), sealed.
    pub(crate) ids: TextList,
    pub(crate) period_end: SystemTime,
    /// `false` for a permuted tag's answer (`"ordered": false`): its texts are in no order, so
    /// neither the byte-order check nor the floor applies to them.
    pub(crate) ordered: bool,
}

/// The list route's body, read leniently so that a plain tag's answer (numbers, no
/// `period_end`) can be told from a broken one.
#[derive(Deserialize)]
struct IdsBody {
    #[serde(default)]
    biz_tag: Option<String>,
    ids: IdList,
    #[serde(default)]
    period_end: Option<String>,
    /// Absent: ordered (every answer before permuted tags).
    #[serde(default)]
    ordered: Option<bool>,
}

/// The `ids` array as read: its strings appended to one `TextList` as they are parsed (no
/// `String` per text, none when the text has no escape), the rest only described.
#[derive(Debug, Default)]
struct IdList {
    texts: TextList,
    /// Elements read.
    count: usize,
    /// Elements that are JSON numbers.
    numbers: usize,
    /// The first element that is not a text this list can hold: why.
    first_bad: Option<String>,
}

/// One element of `ids`, as its visitor saw it.
enum Elem<'de> {
    Text(std::borrow::Cow<'de, str>),
    Number,
    Other(&'static str),
}

impl<'de> Deserialize<'de> for Elem<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Elem<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an id")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Elem<'de>, E> {
                Ok(Elem::Text(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Elem<'de>, E> {
                Ok(Elem::Text(v.to_owned().into()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Elem<'de>, E> {
                Ok(Elem::Number)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Elem<'de>, E> {
                Ok(Elem::Number)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Elem<'de>, E> {
                Ok(Elem::Number)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Elem<'de>, E> {
                Ok(Elem::Other("a boolean"))
            }
            fn visit_unit<E>(self) -> Result<Elem<'de>, E> {
                Ok(Elem::Other("null"))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Elem<'de>, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Elem::Other("an array"))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Elem<'de>, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Elem::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for IdList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = IdList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of ids")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<IdList, A::Error> {
                // Room for the texts the body announces, up to the route's limit (a length hint
                // is the sender's word: it sizes, it never bounds).
                let hint = a.size_hint().unwrap_or(0).min(MAX_FORMATTED_BATCH);
                let mut out = IdList {
                    texts: TextList::with_capacity(hint, 24),
                    ..IdList::default()
                };
                while let Some(e) = a.next_element::<Elem<'de>>()? {
                    out.count += 1;
                    let bad = match e {
                        Elem::Text(t) if t.is_empty() => Some("an empty id".to_owned()),
                        Elem::Text(t) if t.len() > MAX_FORMATTED_LEN => Some(format!(
                            "an id of {} bytes, longer than any format's ({MAX_FORMATTED_LEN})",
                            t.len()
                        )),
                        // Past the route's limit nothing more is kept (the count is checked
                        // against the request's anyway).
                        Elem::Text(_) if out.count > MAX_FORMATTED_BATCH => None,
                        Elem::Text(t) => {
                            (!out.texts.push(&t)).then(|| format!("id {t:?} not kept"))
                        }
                        Elem::Number => {
                            out.numbers += 1;
                            Some("an id that is a number, not a string".to_owned())
                        }
                        Elem::Other(what) => Some(format!("an id that is {what}, not a string")),
                    };
                    if out.first_bad.is_none() {
                        out.first_bad = bad;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V)
    }
}

impl Answer for Texts {
    fn parse(bytes: &[u8], req: &Request, server: &str) -> Result<Self, Outcome> {
        let body: IdsBody = serde_json::from_slice(bytes)
            .map_err(|e| Outcome::Fault(Fault::BadResponse(e.to_string())))?;
        validate(body, req, server)
    }
}

/// A body is a batch only if `ids` is a non-empty list of non-empty strings of at most
/// [`MAX_FORMATTED_LEN`] bytes, no longer than asked, increasing as byte strings (unless the
/// body says `"ordered": false`: a permuted tag's texts are in no order, but none twice), with
/// a `period_end` that parses as an RFC 3339 instant, naming the tag asked
/// (`vectors/formats.json`). Numbers without `period_end` are a plain tag's answer:
/// `not_formatted`, final. Anything else is that server's failure.
fn validate(body: IdsBody, req: &Request, server: &str) -> Result<Texts, Outcome> {
    let bad = |m: String| Outcome::Fault(Fault::BadResponse(m));
    let ordered = body.ordered.unwrap_or(true);
    if let Some(want) = &req.tag
        && body.biz_tag.as_ref() != Some(want)
    {
        return Err(bad(format!(
            "asked for tag {want:?}, got {:?}",
            body.biz_tag
        )));
    }
    let list = body.ids;
    if body.period_end.is_none() && list.count > 0 && list.numbers == list.count {
        return Err(Outcome::Rejected(Error::Rejected {
            server: server.to_owned(),
            status: 200,
            code: "not_formatted".to_owned(),
            message: format!(
                "biz_tag {:?} is not formatted: its ids are numbers (use client.segment)",
                req.tag.as_deref().unwrap_or("")
            ),
        }));
    }
    let Some(end) = body.period_end.as_deref() else {
        return Err(bad("no period_end".to_owned()));
    };
    let period_end =
        parse_rfc3339(end).ok_or_else(|| bad(format!("period_end {end:?} is not RFC 3339")))?;
    if list.count == 0 || list.count > req.count {
        return Err(bad(format!(
            "{} ids for a request of {}",
            list.count, req.count
        )));
    }
    if let Some(why) = list.first_bad {
        return Err(bad(why));
    }
    let mut ids = list.texts;
    if ordered {
        for (prev, text) in ids.iter().zip(ids.iter().skip(1)) {
            if prev.as_bytes() >= text.as_bytes() {
                return Err(bad(format!("id {text:?} is not above {prev:?}")));
            }
        }
    } else if ids.iter().collect::<std::collections::HashSet<_>>().len() != ids.len() {
        // Unordered texts have no order to check: a text twice is caught here instead.
        return Err(bad("a text twice in one answer".to_owned()));
    }
    ids.seal();
    Ok(Texts {
        ids,
        period_end,
        ordered,
    })
}

/// An RFC 3339 instant (`2026-11-27T16:00:00Z`, `...:00.999999999Z`, `...+08:00`): the subset
/// the server writes (upper-case `T` and `Z`, no leap second; `vectors/rfc3339.json`).
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if b[at] == b'.' {
        let start = at + 1;
        at = start;
        while at < b.len() && b[at].is_ascii_digit() {
            at += 1;
        }
        let digits = &b[start..at];
        if digits.is_empty() {
            return None;
        }
        for k in 0..9 {
            nanos = nanos * 10 + digits.get(k).map_or(0, |d| u32::from(d - b'0'));
        }
    }
    let offset = match b.get(at..)? {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (num(at + 1..at + 3)?, num(at + 4..at + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let whole = Duration::from_secs(secs.unsigned_abs());
    let t = if secs >= 0 {
        UNIX_EPOCH.checked_add(whole)?
    } else {
        UNIX_EPOCH.checked_sub(whole)?
    };
    t.checked_add(Duration::from_nanos(u64::from(nanos)))
}

/// The catch-up request of a formatted supply after an answer lying wholly at or below its
/// floor: twice the current size, within the list route's limit (PROTOCOL.md).
fn catch_up_count(size: usize) -> usize {
    size.saturating_mul(2).min(MAX_FORMATTED_BATCH).max(size)
}

/// One accepted batch.
#[derive(Debug)]
struct Batch {
    /// The texts, sealed; those before `next` were handed out or cut.
    texts: TextList,
    /// The index of the next text to hand out.
    next: usize,
    period_end: SystemTime,
    size: u64,
    /// Set when the period has ended by the default clock ([`Formatted::arm`]'s timer).
    ended: Arc<AtomicBool>,
    /// The timer task that sets `ended`, aborted when the batch is dropped (it holds only the
    /// flag, so it never keeps texts alive).
    timer: Option<tokio::task::AbortHandle>,
    /// Its number (1, 2, ... in acceptance order): the lock-free path's period rule
    /// (`textcursor.rs`).
    number: u64,
}

impl Batch {
    /// The batch of `texts` (sealed) from index `first` on, numbered `number`.
    fn new(texts: TextList, first: usize, period_end: SystemTime, number: u64) -> Self {
        Self {
            size: texts.len().saturating_sub(first) as u64,
            texts,
            next: first,
            period_end,
            ended: Arc::default(),
            timer: None,
            number,
        }
    }

    /// Texts not yet handed out.
    fn left(&self) -> usize {
        self.texts.len().saturating_sub(self.next)
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

/// Where batches come from.
#[derive(Debug)]
struct Remote {
    servers: Arc<Servers>,
    request: Request,
    sizing: Sizing,
    timing: Timing,
    runtime: tokio::runtime::Handle,
}

/// The batch in the lock-free cursor: its texts `start..start + n` of the current batch are
/// its tickets `LIMIT - n..LIMIT` of generation `generation`.
#[derive(Debug, Clone, Copy)]
struct Installed {
    generation: u64,
    n: u64,
    start: usize,
    /// The ticket that starts the refill, if any.
    preload: Option<u64>,
}

/// A batch that left the cursor, kept for takes whose slot was reused before they read it
/// (they get their ticket's text from here, under the lock).
#[derive(Debug)]
struct Recent {
    installed: Installed,
    texts: TextList,
    number: u64,
    period_end: SystemTime,
}

/// Everything but the failover counter, under one std mutex (never held across an await).
#[derive(Debug, Default)]
struct State {
    /// The batch being served, and since when, for the sizing rule.
    current: Option<Batch>,
    since: Option<Instant>,
    /// The batch to serve after it, once fetched.
    next: Option<Batch>,
    /// The largest text accepted so far.
    floor: Option<FormattedId>,
    /// The refill starts once the current batch has at most this many texts left (10% used).
    preload_at: Option<usize>,
    /// A refill task runs (single flight).
    refilling: bool,
    /// The last refill was refused; waiting callers return it.
    refused: Option<Error>,
    /// The last server failure of the refills, for `Unavailable`.
    last_fault: Option<ServerFault>,
    /// The size of the next request.
    size: usize,
    /// A caller waited because both batches were spent: the next request doubles.
    starved: bool,
    /// A batch was ever current (a cold supply is not starved).
    warm: bool,
    served: u64,
    batches: u64,
    received: u64,
    discarded: u64,
    failed_rounds: u64,
    /// The number of the last batch accepted.
    numbered: u64,
    /// The lock-free path (default clock): the current batch as installed in the cursor.
    installed: Option<Installed>,
    /// Batches that left the cursor, oldest first, and the bytes of their texts.
    history: VecDeque<Recent>,
    history_bytes: usize,
    /// Tickets taken of batches that left the cursor.
    cursor_served: u64,
    /// Tickets taken but not handed out (their batch had ended, or their slot was reused and
    /// their batch left the history): counted in `discarded` too.
    dropped: u64,
    /// The preload ticket was taken while a refill ran or a next batch was there: the refill
    /// that ends without one starts another.
    preload_pending: bool,
}

/// What became of one valid answer (see [`State::accept`]).
#[derive(Debug, PartialEq, Eq)]
enum Accepted {
    /// Stored as the next batch.
    Taken,
    /// Its period had ended by the client's clock: dropped whole, asked again after a backoff.
    Ended { last: String },
    /// Ordered texts all at or below the floor: dropped, asked again at once (the catch-up).
    Behind { last: String, floor: String },
}

impl State {
    /// Whether handing out a text that leaves `left` in the current batch starts the refill
    /// now (the preload: 10% of the batch used, no refill running, no next batch, a remote).
    #[inline]
    fn preload_due(&self, left: usize, remote: bool) -> bool {
        self.preload_at.is_some_and(|m| left <= m)
            && !self.refilling
            && self.next.is_none()
            && remote
    }

    /// Takes one valid answer received at `now` (the client's clock): counts it, drops it
    /// whole if its period has ended, cuts ordered texts to those above the floor (the cut
    /// ones counted), and stores what is left as the next batch. A permuted tag's answer
    /// (`ordered: false`) is stored whole, in the order received: no floor applies to it
    /// and it does not move the floor (its order is hidden on purpose; uniqueness is the
    /// server's, as for every id), so `discarded_ids` counts only texts of an ended period.
    fn accept(&mut self, texts: Texts, now: SystemTime) -> Accepted {
        let mut ids = texts.ids;
        // `validate` sealed it already; sealing is idempotent, and `id` (the floor, the local
        // path) answers only on a sealed list.
        ids.seal();
        let n = ids.len();
        self.received += n as u64;
        let last = || {
            n.checked_sub(1)
                .and_then(|i| ids.get(i))
                .unwrap_or_default()
                .to_owned()
        };
        if now >= texts.period_end {
            self.discarded += n as u64;
            return Accepted::Ended { last: last() };
        }
        let mut cut = 0;
        if texts.ordered {
            cut = self.floor.as_ref().map_or(0, |f| ids.first_above(f));
            self.discarded += cut as u64;
            if cut == n {
                return Accepted::Behind {
                    last: last(),
                    floor: self
                        .floor
                        .as_ref()
                        .map(|f| f.as_str().to_owned())
                        .unwrap_or_default(),
                };
            }
            // The last text is one a FormattedId holds (validate, TextList::push).
            self.floor = n.checked_sub(1).and_then(|i| ids.id(i));
        }
        self.numbered += 1;
        self.next = Some(Batch::new(ids, cut, texts.period_end, self.numbered));
        self.batches += 1;
        Accepted::Taken
    }
}

impl WindowSink for IdWindow {
    #[inline(always)]
    fn put(&mut self, k: usize, pair: &[std::sync::atomic::AtomicU64; 2]) {
        IdWindow::put(self, k, pair);
    }

    #[inline(always)]
    fn wants_rest(&self) -> bool {
        IdWindow::wants_rest(self)
    }
}

// The cursor's window is the longest entry's 128 bytes, 8 pairs, its head the 2 pairs of an
// inline id (`IdWindow::from_entry_window` relies on both).
const _: () = assert!(
    crate::textcursor::BYTES == crate::text::ENTRY_MAX
        && crate::textcursor::BYTES / 16 == 8
        && crate::textcursor::HEAD_PAIRS * 16 == crate::text::INLINE
);

/// The supply of one formatted tag.
#[derive(Debug)]
pub(crate) struct Formatted {
    /// The lock-free local path, with the default clock only (an injected clock is read per
    /// text under the lock).
    cursor: Option<TextCursor>,
    state: Mutex<State>,
    notify: Notify,
    failovers: AtomicU64,
    clock: Clock,
    wait_timeout: Duration,
    remote: Option<Remote>,
    stop: CancellationToken,
}

impl Formatted {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn remote(
        servers: Arc<Servers>,
        tag: &str,
        sizing: Sizing,
        timing: Timing,
        runtime: tokio::runtime::Handle,
        wait_timeout: Duration,
        stop: CancellationToken,
        clock: Clock,
    ) -> Self {
        let request = Request::list(
            format!("/api/v1/segment/{tag}/ids"),
            sizing.min,
            MAX_FORMATTED_BATCH,
            tag.to_owned(),
        );
        Self {
            cursor: clock.0.is_none().then(TextCursor::new),
            state: Mutex::new(State {
                size: sizing.min,
                ..State::default()
            }),
            notify: Notify::new(),
            failovers: AtomicU64::new(0),
            clock,
            wait_timeout,
            remote: Some(Remote {
                servers,
                request,
                sizing,
                timing,
                runtime,
            }),
            stop,
        }
    }

    /// A supply of exactly `ids` (increasing) in a period ending at `period_end`, which never
    /// fetches: benches and tests.
    /// Texts that a `TextList` cannot hold (empty, longer than [`MAX_FORMATTED_LEN`]) are
    /// left out.
    pub(crate) fn fixed(ids: &[String], period_end: SystemTime, clock: Clock) -> Self {
        let mut texts = TextList::with_capacity(ids.len(), ids.first().map_or(0, String::len));
        for t in ids {
            texts.push(t);
        }
        texts.seal();
        let size = texts.len();
        let s = Self {
            cursor: clock.0.is_none().then(TextCursor::new),
            state: Mutex::new(State {
                floor: size.checked_sub(1).and_then(|i| texts.id(i)),
                next: (size > 0).then(|| Batch::new(texts, 0, period_end, 1)),
                numbered: 1,
                ..State::default()
            }),
            notify: Notify::new(),
            failovers: AtomicU64::new(0),
            clock,
            wait_timeout: Duration::ZERO,
            remote: None,
            stop: CancellationToken::new(),
        };
        s.arm_next(SystemTime::now());
        s
    }

    /// Makes the next batch current now (installed in the cursor, with the default clock), as
    /// the first take would: a prefilled supply's first take is then a local one, as the
    /// numeric supply's is (`Supply::fixed`).
    pub(crate) fn warm_up(&self) {
        let mut st = self.lock();
        if let Some(c) = &self.cursor
            && st.current.is_none()
        {
            self.promote_cursor(c, &mut st);
        }
    }

    /// Arms the deadline of the batch in `next` (just accepted, received at `wall_now`), with
    /// the default clock: its `ended` flag is set `period_end - wall_now` from now on the
    /// monotonic clock (tokio's timer on the client's runtime; a thread for a fixed supply,
    /// which has none). With an injected clock nothing is armed: that clock is read per text.
    fn arm_next(&self, wall_now: SystemTime) {
        self.arm_next_locked(&mut self.lock(), wall_now);
    }

    /// [`arm_next`](Self::arm_next) under the lock already held: the refill arms the batch it
    /// just stored before releasing the lock, so no caller can promote it unarmed.
    fn arm_next_locked(&self, st: &mut State, wall_now: SystemTime) {
        if self.clock.0.is_some() {
            return;
        }
        let Some(b) = st.next.as_mut() else {
            return;
        };
        let left = b.period_end.duration_since(wall_now).unwrap_or_default();
        self.arm(b, left);
    }

    /// Sets `b.ended` after `left` (at once if zero), replacing any timer armed before.
    fn arm(&self, b: &mut Batch, left: Duration) {
        if let Some(t) = b.timer.take() {
            t.abort();
        }
        let ended = b.ended.clone();
        // The lock-free path reads the batch's end from the cursor's words (`textcursor.rs`).
        let ender = self.cursor.as_ref().map(|c| c.ender(b.number));
        let end = move || {
            ended.store(true, Ordering::Release);
            if let Some(e) = &ender {
                e.end();
            }
        };
        if left.is_zero() {
            end();
            return;
        }
        match &self.remote {
            Some(r) => {
                let task = r.runtime.spawn(async move {
                    tokio::time::sleep(left).await;
                    end();
                });
                b.timer = Some(task.abort_handle());
            }
            // A fixed supply (benches, tests) has no runtime: a thread sleeps until the deadline,
            // unless the period never ends in practice (`prefilled`'s year 9999).
            None if left < NEVER => {
                std::thread::spawn(move || {
                    std::thread::sleep(left);
                    end();
                });
            }
            None => {}
        }
    }

    /// Marks `b` ended now (both flags: the lock's and the cursor's).
    fn mark_ended(&self, b: &Batch) {
        b.ended.store(true, Ordering::Release);
        if let Some(c) = &self.cursor {
            c.ender(b.number).end();
        }
    }

    #[inline]
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Under the lock: the next text of a batch whose period has not ended, dropping ended
    /// and spent batches, promoting the next one; and whether a refill is to start now.
    #[inline]
    fn take(&self, st: &mut State) -> (Option<FormattedId>, bool) {
        if let Some(c) = &self.cursor {
            return self.take_cursor(c, st, None);
        }
        // An injected clock is read once per call; the default clock is not read here (the
        // batch's `ended` flag, set by its deadline timer: the module's comment).
        let now = self.clock.0.as_ref().map(|f| f());
        loop {
            if let Some(b) = &mut st.current {
                let ended = match now {
                    None => b.ended.load(Ordering::Acquire),
                    Some(now) => now >= b.period_end,
                };
                if !ended && let Some(id) = b.texts.id(b.next) {
                    // Each index is passed once (`next` only grows, under the lock): no text
                    // twice.
                    b.next += 1;
                    let left = b.left();
                    st.served += 1;
                    let due = st.preload_due(left, self.remote.is_some());
                    if due {
                        st.preload_at = None;
                        st.refilling = true;
                        st.refused = None;
                    }
                    return (Some(id), due);
                }
            }
            if !Self::promote(st, now) {
                return (None, false);
            }
        }
    }

    /// Under the lock, off the local path: drops the current batch (counting its texts left
    /// as discarded if its period has ended: the period rule, the whole batch goes) and makes
    /// the next one current; `false` if there is none.
    #[cold]
    fn promote(st: &mut State, now: Option<SystemTime>) -> bool {
        if let Some(b) = st.current.take() {
            let ended = match now {
                None => b.ended.load(Ordering::Acquire),
                Some(now) => now >= b.period_end,
            };
            if ended {
                st.discarded += b.left() as u64;
            }
        }
        let Some(b) = st.next.take() else {
            return false;
        };
        // Once per batch: the wall clock too, so a wall clock stepped forward since receipt is
        // caught here (the module's comment).
        if now.is_none() && SystemTime::now() >= b.period_end {
            b.ended.store(true, Ordering::Release);
        }
        st.preload_at = Some((b.size - b.size / 10) as usize);
        st.since = Some(Instant::now());
        st.warm = true;
        st.current = Some(b);
        true
    }

    /// The text of a window the cursor copied for a `Take::Text` or `Take::Preload` (only
    /// those).
    #[inline(always)]
    fn id_of(window: IdWindow) -> FormattedId {
        // SAFETY: the cursor answers `Text` or `Preload` only after it put the window's head,
        // and its rest when `wants_rest` said so (`read_window` returned `Some`), and its
        // seqlock check passed, so the window is the whole entry its `install` wrote from one
        // `&str` of 1 to 127 bytes: its length byte, then that `&str`'s bytes
        // (`textcursor.rs`), which is `FormattedId`'s invariant.
        unsafe { FormattedId::from_entry_window(window) }
    }

    /// The lock-free path's slow part, under the lock: settles `first` (a take that got no
    /// text: `Spent`, `Ended` or `Stale`, never `Text` or `Preload`, which their callers hand
    /// out) and takes again, installing the next batch when the one in the cursor is spent or
    /// ended; `(text, refill due)`.
    fn take_cursor(
        &self,
        c: &TextCursor,
        st: &mut State,
        mut first: Option<Take>,
    ) -> (Option<FormattedId>, bool) {
        loop {
            let mut w = IdWindow::new();
            let (take, given) = match first.take() {
                Some(take) => (take, true),
                None => (c.take(&mut w), false),
            };
            match take {
                // Never (the callers hand those out): its window is not here, so its ticket is
                // counted as dropped, as a lost one.
                Take::Text | Take::Preload if given => {
                    debug_assert!(false, "take_cursor given a text");
                    st.dropped += 1;
                    st.discarded += 1;
                }
                Take::Text => return (Some(Self::id_of(w)), false),
                Take::Preload => return (Some(Self::id_of(w)), self.preload_locked(st)),
                Take::Stale { generation, ticket } => {
                    if let Some(got) = self.recover(st, generation, ticket) {
                        return got;
                    }
                }
                // A ticket of an ended batch: never handed out, counted.
                Take::Ended => {
                    st.dropped += 1;
                    st.discarded += 1;
                }
                Take::Spent => {}
            }
            // Spent, ended or stale: take again once the batch in the cursor is one to take
            // from. Each round either takes a text or installs the next batch (which leaves
            // `next` empty), so this ends.
            if let (Some(ins), Some(b)) = (st.installed, &st.current)
                && !b.ended.load(Ordering::Acquire)
                && !c.has_ended(b.number)
                && c.taken(ins.n) < ins.n
            {
                continue;
            }
            if !self.promote_cursor(c, st) {
                return (None, false);
            }
        }
    }

    /// Under the lock: the text of valid ticket `ticket` of `generation`, whose take found its
    /// slot reused, from the batch kept in the history (the same text its `fetch_add` claimed:
    /// see `textcursor.rs`); `None`, the ticket counted as dropped and discarded, if that batch
    /// left the history or its period has ended (its timer may have been aborted with it, so
    /// the wall clock is read too).
    #[cold]
    fn recover(
        &self,
        st: &mut State,
        generation: u64,
        ticket: u64,
    ) -> Option<(Option<FormattedId>, bool)> {
        let cursor = self.cursor.as_ref()?;
        let current = st
            .installed
            .filter(|i| i.generation == generation)
            .zip(st.current.as_ref())
            .map(|(i, b)| (i, &b.texts, b.number, b.period_end));
        let found = current.or_else(|| {
            st.history
                .iter()
                .rev()
                .find(|r| r.installed.generation == generation)
                .map(|r| (r.installed, &r.texts, r.number, r.period_end))
        });
        let id = found.and_then(|(ins, texts, number, period_end)| {
            let offset = ticket.checked_sub(LIMIT - ins.n)?;
            let ended = cursor.has_ended(number) || SystemTime::now() >= period_end;
            let id = texts.id(ins.start + usize::try_from(offset).ok()?);
            (!ended)
                .then_some(id)?
                .map(|id| (id, ins.preload == Some(ticket)))
        });
        match id {
            Some((id, preload)) => {
                let due = preload && self.preload_locked(st);
                Some((Some(id), due))
            }
            None => {
                st.dropped += 1;
                st.discarded += 1;
                None
            }
        }
    }

    /// Under the lock, the preload ticket taken: whether to start the refill now (marked
    /// running); if one runs or a next batch is there, the refill that ends without one starts
    /// another (`preload_pending`).
    fn preload_locked(&self, st: &mut State) -> bool {
        if self.remote.is_none() {
            return false;
        }
        if !st.refilling && st.next.is_none() {
            st.refilling = true;
            st.refused = None;
            st.preload_pending = false;
            true
        } else {
            st.preload_pending = true;
            false
        }
    }

    /// Under the lock, the lock-free path: the batch in the cursor leaves it (retired, its
    /// texts not taken counted as discarded, kept in the history for stale takes) and the next
    /// batch, if any, is installed and made current; `false` if there is none.
    #[cold]
    fn promote_cursor(&self, c: &TextCursor, st: &mut State) -> bool {
        let old = st.installed.take();
        let old_n = old.map_or(0, |i| i.n);
        let mut next = st.next.take();
        let mut installed = None;
        if let Some(b) = &mut next {
            // Once per batch: the wall clock too (the module's comment).
            if SystemTime::now() >= b.period_end {
                self.mark_ended(b);
            }
            let n = b.left();
            // Due once 10% of the batch is used, as `preload_due`: the take that makes it so.
            let preload = self.remote.is_some().then(|| (n / 10).max(1) - 1);
            match c.install(b.texts.iter_from(b.next), b.number, preload, old_n) {
                Some(taken) => {
                    let first = LIMIT - n as u64;
                    installed = Some((
                        taken,
                        Installed {
                            generation: c.generation(),
                            n: n as u64,
                            start: b.next,
                            preload: preload.map(|p| first + p as u64),
                        },
                    ));
                }
                None => {
                    // Never: a TextList holds texts of 1 to 127 bytes, at most 100,000. Such a
                    // batch is dropped whole, counted.
                    st.discarded += n as u64;
                    next = None;
                }
            }
        }
        let taken = match &installed {
            Some((taken, _)) => *taken,
            None if old.is_some() => c.retire(old_n),
            None => 0,
        };
        let previous = st.current.take();
        if let Some(ins) = old {
            st.cursor_served += taken;
            // Tickets never taken are texts never handed out (an ended batch's).
            st.discarded += ins.n.saturating_sub(taken);
            if let Some(mut b) = previous {
                let texts = std::mem::take(&mut b.texts);
                st.history_bytes += texts.bytes();
                st.history.push_back(Recent {
                    installed: ins,
                    texts,
                    number: b.number,
                    period_end: b.period_end,
                });
                while st.history.len() > HISTORY
                    || (st.history.len() > 1 && st.history_bytes > HISTORY_BYTES)
                {
                    if let Some(r) = st.history.pop_front() {
                        st.history_bytes -= r.texts.bytes();
                    }
                }
            }
        }
        let (Some(b), Some((_, ins))) = (next, installed) else {
            return false;
        };
        st.installed = Some(ins);
        st.preload_at = None;
        st.since = Some(Instant::now());
        st.warm = true;
        st.current = Some(b);
        true
    }

    /// Under the lock: texts of the current batch not handed out yet (nor claimed).
    fn current_left(&self, st: &State) -> usize {
        match (&self.cursor, st.installed, &st.current) {
            (Some(c), Some(ins), _) => ins.n.saturating_sub(c.taken(ins.n)) as usize,
            (Some(_), None, _) | (None, _, None) => 0,
            (None, _, Some(b)) => b.left(),
        }
    }

    /// Under the lock, with nothing local: whether to start a refill (marked running).
    fn claim_refill(&self, st: &mut State) -> bool {
        if st.refilling || st.next.is_some() || self.remote.is_none() {
            return false;
        }
        st.refilling = true;
        st.refused = None;
        true
    }

    fn spawn_refill(self: &Arc<Self>) {
        if let Some(r) = &self.remote {
            let this = self.clone();
            r.runtime.spawn(async move { this.refill().await });
        }
    }

    /// A text without waiting; `None` when both batches are spent (a refill then starts).
    ///
    /// The local path: under the lock, with the default clock, a current batch whose `ended`
    /// flag is clear and that stays above its preload mark after this text, the text is copied
    /// out and `next` moves on; everything else (an injected clock, a batch ended or spent, the
    /// preload due) takes [`take`](Self::take) as before. The two agree: this is `take`'s first
    /// branch for the case where it returns no refill to start.
    #[inline]
    pub(crate) fn try_next_id(self: &Arc<Self>) -> Option<FormattedId> {
        if let Some(c) = &self.cursor {
            // The lock-free path (`textcursor.rs`): one `fetch_add` and a read of 32 bytes.
            return match c.take_head() {
                // SAFETY: `take_head` answers `Text` and `Preload` only with the whole entry of
                // a text of up to 31 bytes, read after its seqlock check passed: the length
                // byte and the bytes of the `&str` its `install` wrote (`FormattedId`'s
                // invariant).
                Fast::Text(head) => Some(unsafe { FormattedId::from_inline_entry(head) }),
                Fast::Preload(head) => {
                    // SAFETY: as above.
                    let id = unsafe { FormattedId::from_inline_entry(head) };
                    self.preload_now();
                    Some(id)
                }
                Fast::Other(s) => self.try_next_id_claimed(c, s),
            };
        }
        let mut guard = self.lock();
        let st = &mut *guard;
        if self.clock.0.is_none()
            && let Some(b) = &st.current
            && !b.ended.load(Ordering::Acquire)
            && !st.preload_due(b.left().saturating_sub(1), self.remote.is_some())
            && let Some(id) = b.texts.id(b.next)
            && let Some(b) = &mut st.current
        {
            // Each index is passed once (`next` only grows, under the lock): no text twice.
            b.next += 1;
            st.served += 1;
            return Some(id);
        }
        self.try_next_id_slow(guard)
    }

    /// [`try_next_id`](Self::try_next_id) after a lock-free claim `s` whose fast read got no
    /// short text: the take is finished by a whole read of its window (a longer text, or what
    /// it got instead: `textcursor.rs`'s `take_head`).
    #[cold]
    fn try_next_id_claimed(self: &Arc<Self>, c: &TextCursor, s: u64) -> Option<FormattedId> {
        let mut w = IdWindow::new();
        match c.read(s, &mut w) {
            Take::Text => Some(Self::id_of(w)),
            Take::Preload => {
                let id = Self::id_of(w);
                self.preload_now();
                Some(id)
            }
            other => self.try_next_id_cursor(c, other),
        }
    }

    /// [`try_next_id`](Self::try_next_id) after a lock-free take that got no plain text.
    #[cold]
    fn try_next_id_cursor(self: &Arc<Self>, c: &TextCursor, first: Take) -> Option<FormattedId> {
        let (id, spawn) = {
            let mut st = self.lock();
            let (id, due) = self.take_cursor(c, &mut st, Some(first));
            let spawn = due || (id.is_none() && self.claim_refill(&mut st));
            (id, spawn)
        };
        if spawn {
            self.spawn_refill();
        }
        id
    }

    /// The preload ticket was taken (lock-free): start the refill if due (`preload_locked`).
    #[cold]
    fn preload_now(self: &Arc<Self>) {
        let due = self.preload_locked(&mut self.lock());
        if due {
            self.spawn_refill();
        }
    }

    /// [`try_next_id`](Self::try_next_id) off its fast path, the lock held (released here).
    #[cold]
    fn try_next_id_slow(self: &Arc<Self>, mut st: MutexGuard<'_, State>) -> Option<FormattedId> {
        let (id, spawn) = {
            let (id, due) = self.take(&mut st);
            let spawn = due || (id.is_none() && self.claim_refill(&mut st));
            drop(st);
            (id, spawn)
        };
        if spawn {
            self.spawn_refill();
        }
        id
    }

    /// A text: the local batches, else wait for the refill (at most the wait timeout).
    pub(crate) async fn next_id(self: &Arc<Self>) -> Result<FormattedId, Error> {
        if let Some(id) = self.try_next_id() {
            return Ok(id);
        }
        self.wait_for_batch().await
    }

    #[cold]
    async fn wait_for_batch(self: &Arc<Self>) -> Result<FormattedId, Error> {
        let deadline = Instant::now() + self.wait_timeout;
        let mut waited = false;
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let spawn = {
                let mut st = self.lock();
                let (id, due) = self.take(&mut st);
                if let Some(id) = id {
                    drop(st);
                    if due {
                        self.spawn_refill();
                    }
                    return Ok(id);
                }
                if let (true, Some(e)) = (waited, &st.refused) {
                    return Err(e.clone());
                }
                if !waited && st.warm {
                    st.starved = true;
                }
                self.claim_refill(&mut st)
            };
            if spawn {
                self.spawn_refill();
            }
            waited = true;
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let mut st = self.lock();
                let (id, due) = self.take(&mut st);
                let last = st.last_fault.clone();
                drop(st);
                if due {
                    self.spawn_refill();
                }
                return id.ok_or(Error::Unavailable {
                    waited: self.wait_timeout,
                    last,
                });
            }
        }
    }

    /// Fetches one batch above the floor, in a period not ended by the client's clock, into
    /// `next`; failed rounds retried with backoff for at most the wait timeout.
    async fn refill(self: Arc<Self>) {
        let r = self.remote.as_ref().expect("only remote supplies refill");
        let deadline = Instant::now() + self.wait_timeout;
        let sized = {
            let mut st = self.lock();
            let left = self.current_left(&st) as u64;
            let usage = st.current.as_ref().zip(st.since).map(|(b, since)| Usage {
                size: b.size,
                used: b.size.saturating_sub(left),
                elapsed: since.elapsed(),
            });
            let size = r.sizing.next(st.size, usage, st.starved);
            st.size = size;
            st.starved = false;
            r.request.with_count(size)
        };
        let mut req = sized.clone();
        let mut failures = 0;
        let mut delivered = false;
        while !self.stop.is_cancelled() {
            let wait = match r.servers.fetch::<Texts>(&req, &self.failovers).await {
                Ok((texts, server)) => {
                    let mut st = self.lock();
                    let now = self.clock.now();
                    match st.accept(texts, now) {
                        Accepted::Taken => {
                            st.last_fault = None;
                            self.arm_next_locked(&mut st, now);
                            delivered = true;
                            break;
                        }
                        Accepted::Ended { last } => {
                            // Ended by this client's clock before it was even stored.
                            st.last_fault = Some(ServerFault {
                                server: server.to_owned(),
                                fault: Fault::PeriodEnded { last },
                            });
                            failures += 1;
                            backoff(&r.timing, failures)
                        }
                        Accepted::Behind { last, floor } => {
                            // All at or below the floor: a server behind the one used before.
                            // The catch-up: a gap between texts cannot be sized, so ask again
                            // at once for twice the current size (at most the route's limit);
                            // the size itself is unchanged.
                            st.last_fault = Some(ServerFault {
                                server: server.to_owned(),
                                fault: Fault::TextsBehind { last, floor },
                            });
                            req = sized.with_count(catch_up_count(sized.count));
                            Duration::ZERO
                        }
                    }
                }
                Err(FetchError::Rejected(e)) => {
                    self.lock().refused = Some(e);
                    break;
                }
                Err(FetchError::Unavailable(fault)) => {
                    let mut st = self.lock();
                    st.failed_rounds += 1;
                    st.last_fault = fault;
                    failures += 1;
                    backoff(&r.timing, failures)
                }
            };
            let wake = Instant::now() + wait;
            if wake >= deadline {
                break;
            }
            if wait.is_zero() {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        let again = {
            let mut st = self.lock();
            st.refilling = false;
            // The preload came while this refill ran (its batch was made current meanwhile):
            // the next one starts now, as the preload would have.
            let again =
                st.preload_pending && delivered && st.next.is_none() && !self.stop.is_cancelled();
            st.preload_pending = false;
            if again {
                st.refilling = true;
                st.refused = None;
            }
            again
        };
        self.notify.notify_waiters();
        if again {
            self.spawn_refill();
        }
    }

    pub(crate) fn stats(&self) -> SupplyStats {
        let st = self.lock();
        // Lock-free takes are counted by the cursor's tickets, less those dropped.
        let in_cursor = match (&self.cursor, st.installed) {
            (Some(c), Some(ins)) => c.taken(ins.n),
            _ => 0,
        };
        SupplyStats {
            ids_served: (st.served + st.cursor_served + in_cursor).saturating_sub(st.dropped),
            batches: st.batches,
            ids_received: st.received,
            discarded_ids: st.discarded,
            failed_rounds: st.failed_rounds,
            failovers: self.failovers.load(Ordering::Relaxed),
            batch_size: st.size as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(count: usize) -> Request {
        Request::list("/r".into(), count, MAX_FORMATTED_BATCH, "orders".into())
    }

    fn parse(json: &str, asked: usize) -> Result<Vec<String>, String> {
        match Texts::parse(json.as_bytes(), &req(asked), "http://s") {
            Ok(t) => Ok(t.ids.iter().map(str::to_owned).collect()),
            Err(Outcome::Fault(f)) => Err(format!("fault {f:?}")),
            Err(Outcome::Rejected(e) | Outcome::Throttled { error: e, .. }) => {
                Err(format!("rejected {e}"))
            }
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_instants_parse_and_others_do_not() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(at(0)));
        assert_eq!(
            parse_rfc3339("2026-11-28T00:00:00Z"),
            Some(at(1_795_824_000))
        );
        assert_eq!(
            parse_rfc3339("2026-11-27T16:00:00Z"),
            parse_rfc3339("2026-11-28T00:00:00+08:00")
        );
        assert_eq!(
            parse_rfc3339("2026-11-27T23:00:00-01:00"),
            parse_rfc3339("2026-11-28T00:00:00Z")
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00.5Z"),
            Some(at(1_709_164_800) + Duration::from_millis(500))
        );
        assert_eq!(
            parse_rfc3339("9999-12-30T22:00:00.999999999Z"),
            Some(at(253_402_207_200) + Duration::from_nanos(999_999_999))
        );
        for bad in [
            "",
            "2026-11-28",
            "2026-11-28T00:00:00",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-28T24:00:00Z",
            "2026-11-28T00:00:00.Z",
            "2026-11-28T00:00:00+8:00",
            "2026-11-28T00:00:00Zjunk",
            "2026/11/28T00:00:00Z",
            "+026-11-28T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_increasing_non_empty_texts_with_a_period_end_are_a_batch() {
        let ok = r#"{"biz_tag":"orders","ids":["ORD-2026112700000001","ORD-2026112700000002"],"period":"20261127","period_end":"2026-11-28T00:00:00Z"}"#;
        assert_eq!(
            parse(ok, 2).unwrap(),
            ["ORD-2026112700000001", "ORD-2026112700000002"]
        );
        // A period_end far away (a tag that never resets) is fine; no tag named is not.
        assert!(
            parse(
                r#"{"biz_tag":"orders","ids":["T-1"],"period_end":"9999-12-30T22:00:00.999999999Z"}"#,
                1
            )
            .is_ok()
        );
        assert!(parse(r#"{"ids":["T-1"],"period_end":"2026-11-28T00:00:00Z"}"#, 1).is_err());
        for (bad, asked) in [
            (ok, 1), // more than asked
            (
                r#"{"biz_tag":"x","ids":["a"],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":[],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":[""],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["b","a"],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["a","a"],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["a",1],"period_end":"2026-11-28T00:00:00Z"}"#,
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["a"],"period_end":"tomorrow"}"#,
                5,
            ),
            (r#"{"biz_tag":"orders","ids":["a"]}"#, 5),
            (r#"{"biz_tag":"orders","ids":["1","2"]}"#, 5), // a plain tag asked with stringify_ids: not ours
            (r#"{"period_end":"2026-11-28T00:00:00Z"}"#, 5),
            ("not json", 5),
        ] {
            let r = parse(bad, asked);
            assert!(
                r.as_ref().is_err_and(|e| e.starts_with("fault")),
                "{bad}: {r:?}"
            );
        }
    }

    fn texts_at(ids: &[&str], period_end: SystemTime) -> Texts {
        texts(ids, period_end, true)
    }

    fn texts(ids: &[&str], period_end: SystemTime, ordered: bool) -> Texts {
        let mut list = TextList::with_capacity(ids.len(), 4);
        for t in ids {
            assert!(list.push(t), "{t:?}");
        }
        list.seal();
        Texts {
            ids: list,
            period_end,
            ordered,
        }
    }

    #[test]
    fn an_unordered_answer_skips_the_byte_order_check_and_nothing_else() {
        let end = r#""period_end":"2026-11-28T00:00:00Z""#;
        let permuted = format!(
            r#"{{"biz_tag":"orders","ids":["T-9F3K2Q","T-0000A1","T-ZZZZZ0"],{end},"ordered":false}}"#
        );
        assert_eq!(
            parse(&permuted, 3).unwrap(),
            ["T-9F3K2Q", "T-0000A1", "T-ZZZZZ0"],
            "taken as received"
        );
        let r = Texts::parse(permuted.as_bytes(), &req(3), "http://s");
        assert!(r.is_ok_and(|t| !t.ordered));
        // Absent or true: ordered, checked as before.
        for body in [
            format!(r#"{{"biz_tag":"orders","ids":["a","b"],{end}}}"#),
            format!(r#"{{"biz_tag":"orders","ids":["a","b"],{end},"ordered":true}}"#),
        ] {
            let r = Texts::parse(body.as_bytes(), &req(2), "http://s");
            assert!(r.is_ok_and(|t| t.ordered), "{body}");
        }
        for (bad, asked) in [
            (
                format!(r#"{{"biz_tag":"orders","ids":["b","a"],{end},"ordered":true}}"#),
                5,
            ),
            (
                format!(r#"{{"biz_tag":"orders","ids":["b","a"],{end}}}"#),
                5,
            ),
            (
                format!(r#"{{"biz_tag":"orders","ids":["b","a"],{end},"ordered":"no"}}"#),
                5,
            ),
            (
                format!(r#"{{"biz_tag":"orders","ids":["b","a"],{end},"ordered":null}}"#),
                5,
            ),
            (permuted.clone(), 2), // more than asked
            (
                format!(r#"{{"biz_tag":"orders","ids":[],{end},"ordered":false}}"#),
                5,
            ),
            (
                format!(r#"{{"biz_tag":"orders","ids":["b",""],{end},"ordered":false}}"#),
                5,
            ),
            (
                format!(r#"{{"biz_tag":"orders","ids":["b",7],{end},"ordered":false}}"#),
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["b","a"],"ordered":false}"#.to_owned(),
                5,
            ),
            (
                r#"{"biz_tag":"orders","ids":["b","a"],"period_end":"soon","ordered":false}"#
                    .to_owned(),
                5,
            ),
        ] {
            let r = parse(&bad, asked);
            assert!(
                r.as_ref().is_err_and(|e| e.starts_with("fault")),
                "{bad}: {r:?}"
            );
        }
    }

    #[test]
    fn an_unordered_batch_is_handed_out_as_received_with_no_floor_but_the_period_rule() {
        let now = Arc::new(AtomicU64::new(100));
        let clock = {
            let now = now.clone();
            Clock(Some(Arc::new(move || at(now.load(Ordering::Relaxed)))))
        };
        let s = Arc::new(Formatted::fixed(&[], at(200), clock));
        // An ordered batch first: the floor is its last text.
        assert_eq!(
            s.lock()
                .accept(texts(&["T-5", "T-6"], at(200), true), at(100)),
            Accepted::Taken
        );
        assert_eq!(s.try_next_id().as_deref(), Some("T-5"));
        assert_eq!(s.try_next_id().as_deref(), Some("T-6"));
        // A permuted answer, texts below and above the floor in no order: taken whole, as
        // received, and the floor does not move.
        let got = s.lock().accept(
            texts(&["T-Q", "T-1", "T-7", "T-3"], at(200), false),
            at(100),
        );
        assert_eq!(got, Accepted::Taken);
        assert_eq!(s.lock().floor.as_deref(), Some("T-6"));
        let out: Vec<String> = std::iter::from_fn(|| s.try_next_id().map(String::from)).collect();
        assert_eq!(out, ["T-Q", "T-1", "T-7", "T-3"]);
        let st = s.stats();
        assert_eq!((st.ids_served, st.discarded_ids, st.batches), (6, 0, 2));
        // A permuted answer already ended when it arrives: dropped whole, counted.
        let got = s
            .lock()
            .accept(texts(&["T-9", "T-2"], at(150), false), at(150));
        assert_eq!(got, Accepted::Ended { last: "T-2".into() });
        assert_eq!(s.try_next_id(), None);
        // One in hand whose period ends by the clock: dropped whole, none handed out.
        let got = s
            .lock()
            .accept(texts(&["T-8", "T-4", "T-Z"], at(300), false), at(150));
        assert_eq!(got, Accepted::Taken);
        assert_eq!(s.try_next_id().as_deref(), Some("T-8"));
        now.store(300, Ordering::Relaxed);
        assert_eq!(s.try_next_id(), None);
        let st = s.stats();
        assert_eq!(
            (st.ids_served, st.discarded_ids, st.ids_received),
            (7, 2 + 2, 11),
            "discarded: only texts of an ended period"
        );
        // Ordered answers still meet the floor, which the permuted ones left at T-6.
        now.store(100, Ordering::Relaxed);
        let got = s
            .lock()
            .accept(texts(&["T-4", "T-5", "T-6"], at(400), true), at(100));
        assert_eq!(
            got,
            Accepted::Behind {
                last: "T-6".into(),
                floor: "T-6".into()
            }
        );
    }

    #[test]
    fn numbers_without_a_period_end_are_a_plain_tag_refused_for_good() {
        let r = Texts::parse(
            br#"{"biz_tag":"orders","ids":[4,5,6]}"#,
            &req(3),
            "http://s",
        );
        match r {
            Err(Outcome::Rejected(Error::Rejected { code, status, .. })) => {
                assert_eq!((code.as_str(), status), ("not_formatted", 200));
            }
            _ => panic!("not a rejection"),
        }
    }

    #[test]
    fn the_catch_up_asks_twice_the_size_within_the_route_limit() {
        assert_eq!(catch_up_count(50), 100);
        assert_eq!(catch_up_count(60_000), MAX_FORMATTED_BATCH);
        assert_eq!(catch_up_count(MAX_FORMATTED_BATCH), MAX_FORMATTED_BATCH);
    }

    /// The default clock (issue 47): no clock read per text; the deadline timer armed at receipt
    /// sets the batch's `ended` flag. The deadline passes between two texts: the first is
    /// handed out, the second is not (the batch dropped whole, its two texts left counted), and
    /// the next answer, accepted and armed as a refill does, is served.
    #[test]
    fn the_deadline_passes_between_two_texts() {
        let ids: Vec<String> = (1..=3).map(|k| format!("A-{k}")).collect();
        let end = SystemTime::now() + Duration::from_millis(400);
        let s = Arc::new(Formatted::fixed(&ids, end, Clock(None)));
        let ended = s.lock().next.as_ref().map(|b| b.ended.clone()).unwrap();
        assert_eq!(s.try_next_id().as_deref(), Some("A-1"));
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        while !ended.load(Ordering::Acquire) {
            assert!(
                std::time::Instant::now() < give_up,
                "the deadline never fired"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            SystemTime::now() >= end,
            "the flag was set before period_end"
        );
        assert_eq!(s.try_next_id(), None);
        let st = s.stats();
        assert_eq!((st.ids_served, st.discarded_ids), (1, 2));
        let now = SystemTime::now();
        let next = texts(&["A-4", "A-5"], now + Duration::from_secs(86_400), true);
        assert_eq!(s.lock().accept(next, now), Accepted::Taken);
        s.arm_next(now);
        assert_eq!(s.try_next_id().as_deref(), Some("A-4"));
        assert_eq!(s.try_next_id().as_deref(), Some("A-5"));
    }

    #[test]
    fn a_text_longer_than_a_formatted_id_refuses_the_whole_answer() {
        let body = |texts: &[String]| {
            let ids: Vec<String> = texts.iter().map(|t| format!("{t:?}")).collect();
            format!(
                r#"{{"biz_tag":"orders","ids":[{}],"period_end":"2026-11-28T00:00:00Z"}}"#,
                ids.join(",")
            )
        };
        let longest = format!("A{}", "9".repeat(MAX_FORMATTED_LEN - 1));
        let over = format!("B{}", "9".repeat(MAX_FORMATTED_LEN));
        assert_eq!(
            parse(&body(std::slice::from_ref(&longest)), 1).unwrap(),
            [longest.as_str()]
        );
        for texts in [
            vec![over.clone()],
            vec![longest.clone(), over.clone()],
            vec!["A".to_owned(), "X".repeat(100_000)],
        ] {
            let r = parse(&body(&texts), 5);
            assert!(
                r.as_ref().is_err_and(|e| e.contains("longer than")),
                "{r:?}"
            );
        }
        // Escaped text (no borrowed str from the body) is read the same; a number, null, an
        // array or an object among the texts is that server's failure, not a plain tag.
        let escaped =
            r#"{"biz_tag":"orders","ids":["A-1","A-é"],"period_end":"2026-11-28T00:00:00Z"}"#;
        assert_eq!(parse(escaped, 2).unwrap(), ["A-1", "A-é"]);
        for other in ["1", "null", "true", "[\"a\"]", r#"{"a":"b"}"#] {
            let json = format!(
                r#"{{"biz_tag":"orders","ids":["A-1",{other},"A-3"],"period_end":"2026-11-28T00:00:00Z"}}"#
            );
            let r = parse(&json, 5);
            assert!(
                r.as_ref().is_err_and(|e| e.starts_with("fault")),
                "{json}: {r:?}"
            );
        }
    }

    /// Four threads on one batch: every text handed out once, each caller's texts increasing,
    /// none lost (the counters agree).
    #[test]
    fn threads_on_one_batch_get_each_text_once_in_increasing_order() {
        threads_on_one_batch((0..40_000).map(|k| format!("ORD-20261127{k:08}")).collect());
    }

    /// The same with every seventh text longer than an inline id (32 to 52 bytes): those go
    /// through the whole read and the heap, the others through the fast take, interleaved.
    #[test]
    fn threads_on_one_batch_of_short_and_long_texts_get_each_once_in_increasing_order() {
        threads_on_one_batch(
            (0..40_000)
                .map(|k| {
                    let text = format!("ORD-20261127{k:08}");
                    if k % 7 == 0 {
                        format!("{text}-{}", "X".repeat(12 + k % 20))
                    } else {
                        text
                    }
                })
                .collect(),
        );
    }

    fn threads_on_one_batch(ids: Vec<String>) {
        let n = ids.len();
        let end = SystemTime::now() + Duration::from_secs(3600);
        let s = Arc::new(Formatted::fixed(&ids, end, Clock(None)));
        let got: Vec<Vec<FormattedId>> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let s = s.clone();
                    scope.spawn(move || std::iter::from_fn(|| s.try_next_id()).collect())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = std::collections::HashSet::new();
        for caller in &got {
            assert!(
                caller.windows(2).all(|w| w[0] < w[1]),
                "a caller's texts do not increase"
            );
            for t in caller {
                assert!(seen.insert(t.clone()), "{t} handed out twice");
            }
        }
        assert_eq!(seen.len(), n);
        assert!(
            ids.iter().all(|t| seen.contains(t.as_str())),
            "only the batch's texts"
        );
        let st = s.stats();
        assert_eq!((st.ids_served, st.discarded_ids), (n as u64, 0));
    }

    /// Four threads taking while a feeder stores batch after batch as a refill would (each
    /// above the floor, one at a time into `next`): the fast path and the promotions race.
    /// Every text handed out once, each caller's texts increasing, none lost.
    #[test]
    fn threads_across_batch_switches_get_each_text_once_in_increasing_order() {
        const BATCHES: usize = 200;
        const PER: usize = 250;
        let end = SystemTime::now() + Duration::from_secs(3600);
        let text = |k: usize| format!("ORD-20261127{k:08}");
        let first: Vec<String> = (0..PER).map(text).collect();
        let s = Arc::new(Formatted::fixed(&first, end, Clock(None)));
        let fed = AtomicBool::new(false);
        let got: Vec<Vec<FormattedId>> = std::thread::scope(|scope| {
            let feeder = scope.spawn(|| {
                for b in 1..BATCHES {
                    let ids: Vec<String> = (b * PER..(b + 1) * PER).map(text).collect();
                    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                    loop {
                        let mut st = s.lock();
                        if st.next.is_none() {
                            let got = st.accept(texts(&refs, end, true), SystemTime::now());
                            assert_eq!(got, Accepted::Taken);
                            break;
                        }
                        drop(st);
                        std::thread::yield_now();
                    }
                }
                fed.store(true, Ordering::Release);
            });
            let takers: Vec<_> = (0..4)
                .map(|_| {
                    let (s, fed) = (s.clone(), &fed);
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        loop {
                            let done = fed.load(Ordering::Acquire);
                            match s.try_next_id() {
                                Some(t) => out.push(t),
                                None if done => break out,
                                None => std::thread::yield_now(),
                            }
                        }
                    })
                })
                .collect();
            feeder.join().unwrap();
            takers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = std::collections::HashSet::new();
        for caller in &got {
            assert!(
                caller.windows(2).all(|w| w[0] < w[1]),
                "a caller's texts do not increase"
            );
            for t in caller {
                assert!(seen.insert(t.clone()), "{t} handed out twice");
            }
        }
        assert_eq!(seen.len(), BATCHES * PER, "every text handed out");
        let st = s.stats();
        assert_eq!(
            (st.ids_served, st.discarded_ids, st.batches),
            ((BATCHES * PER) as u64, 0, BATCHES as u64 - 1)
        );
    }

    /// Takes until `None`, under no contention.
    fn drain(s: &Arc<Formatted>) -> Vec<String> {
        std::iter::from_fn(|| s.try_next_id().map(String::from)).collect()
    }

    /// The lock-free path (default clock): a take that claimed a ticket of batch A and read its
    /// slot only after two more batches were installed (A's slot reused) gets A's text from
    /// the history, not the reused slot's; one whose batch left the history gets nothing and
    /// is counted; one whose batch's period ended meanwhile gets nothing either.
    #[test]
    fn a_take_whose_slot_was_reused_gets_its_own_text_or_nothing() {
        let end = SystemTime::now() + Duration::from_secs(3600);
        let a: Vec<String> = ["A-1", "A-2", "A-3"].map(String::from).to_vec();
        let s = Arc::new(Formatted::fixed(&a, end, Clock(None)));
        s.warm_up();
        let c = s.cursor.as_ref().unwrap();
        let stalled = c.claim(); // A-1's ticket, read later
        assert_eq!(s.try_next_id().as_deref(), Some("A-2"));
        let feed = |texts: &[&str]| {
            let got = s.lock().accept(texts_at(texts, end), SystemTime::now());
            assert_eq!(got, Accepted::Taken);
        };
        // Each next batch is there before the one in use is spent: installed directly, so
        // generations 2 (B) and 3 (C, in A's slot).
        feed(&["B-1"]);
        assert_eq!(s.try_next_id().as_deref(), Some("A-3"));
        assert_eq!(s.try_next_id().as_deref(), Some("B-1"));
        feed(&["C-1", "C-2"]);
        assert_eq!(s.try_next_id().as_deref(), Some("C-1"));
        // A is in the history; its slot holds C now.
        let late = c.read(stalled, &mut IdWindow::new());
        assert!(matches!(late, Take::Stale { .. }), "{late:?}");
        let got = s.take_cursor(c, &mut s.lock(), Some(late));
        assert_eq!(got.0.as_deref(), Some("A-1"), "its own text, recovered");
        assert_eq!(drain(&s), ["C-2"]);
        let st = s.stats();
        assert_eq!((st.ids_served, st.discarded_ids), (6, 0));
        // A stalled take of D, whose batch leaves the history before it reads.
        feed(&["D-1", "D-2"]);
        let stalled = {
            assert_eq!(s.try_next_id().as_deref(), Some("D-1"));
            c.claim()
        };
        // Each E installed while the one before is in use (consecutive generations): D's slot
        // is reused, and D leaves the history after HISTORY more batches.
        for k in 0..=HISTORY {
            let e = format!("E-{k:05}");
            feed(&[e.as_str()]);
            assert_eq!(s.try_next_id().as_deref(), Some(e.as_str()));
        }
        let late = c.read(stalled, &mut IdWindow::new());
        let got = s.take_cursor(c, &mut s.lock(), Some(late));
        assert_eq!(got.0, None, "D-2 is gone: a gap, counted");
        let st = s.stats();
        assert_eq!(
            (st.ids_served, st.discarded_ids),
            (6 + 1 + HISTORY as u64 + 1, 1)
        );
        // A stalled take of F, whose period ends before it reads: nothing, counted.
        feed(&["F-1", "F-2"]);
        assert_eq!(s.try_next_id().as_deref(), Some("F-1"));
        let stalled = c.claim();
        let f = s.lock().current.as_ref().map(|b| b.number).unwrap();
        c.ender(f).end();
        let late = c.read(stalled, &mut IdWindow::new());
        let got = s.take_cursor(c, &mut s.lock(), Some(late));
        assert_eq!(got.0, None);
        assert_eq!(s.stats().discarded_ids, 2);
    }

    /// Four threads taking while a feeder stores many small batches (slots reused over and
    /// over, stale takes likely): every text handed out at most once and only texts received,
    /// each thread's texts increasing, and the texts handed out are exactly the received ones
    /// less those counted as discarded.
    #[test]
    fn four_threads_across_many_small_batches_lose_nothing_uncounted() {
        const BATCHES: usize = 3000;
        let end = SystemTime::now() + Duration::from_secs(3600);
        let text = |k: usize| format!("ORD-20261127{k:08}");
        let s = Arc::new(Formatted::fixed(&[text(0)], end, Clock(None)));
        let fed = AtomicBool::new(false);
        let mut received = 1;
        let got: Vec<Vec<FormattedId>> = std::thread::scope(|scope| {
            let feeder = scope.spawn(|| {
                let mut k = 1;
                let mut received = 1;
                for b in 1..BATCHES {
                    let n = 1 + b % 7;
                    let ids: Vec<String> = (k..k + n).map(text).collect();
                    k += n;
                    received += n;
                    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                    loop {
                        let mut st = s.lock();
                        if st.next.is_none() {
                            let got = st.accept(texts(&refs, end, true), SystemTime::now());
                            assert_eq!(got, Accepted::Taken);
                            break;
                        }
                        drop(st);
                        std::thread::yield_now();
                    }
                }
                fed.store(true, Ordering::Release);
                received
            });
            let takers: Vec<_> = (0..4)
                .map(|_| {
                    let (s, fed) = (s.clone(), &fed);
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        loop {
                            let done = fed.load(Ordering::Acquire);
                            match s.try_next_id() {
                                Some(t) => out.push(t),
                                None if done => break out,
                                None => std::thread::yield_now(),
                            }
                        }
                    })
                })
                .collect();
            received = feeder.join().unwrap();
            takers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = std::collections::HashSet::new();
        for caller in &got {
            assert!(
                caller.windows(2).all(|w| w[0] < w[1]),
                "a caller's texts do not increase"
            );
            for t in caller {
                assert!(seen.insert(t.clone()), "{t} handed out twice");
                let k: usize = t[12..].parse().unwrap();
                assert_eq!(t.as_str(), text(k), "only received texts");
                assert!(k < received, "only received texts");
            }
        }
        let st = s.stats();
        assert_eq!(st.ids_received as usize + 1, received);
        assert_eq!(
            seen.len() as u64 + st.discarded_ids,
            received as u64,
            "every text handed out or counted"
        );
        assert_eq!(st.ids_served, seen.len() as u64);
    }

    #[test]
    fn a_batch_whose_period_ended_by_the_clock_is_dropped_whole_and_counted() {
        let now = Arc::new(AtomicU64::new(100));
        let clock = {
            let now = now.clone();
            Clock(Some(Arc::new(move || at(now.load(Ordering::Relaxed)))))
        };
        let ids: Vec<String> = (1..=5).map(|k| format!("D1-{k}")).collect();
        let s = Arc::new(Formatted::fixed(&ids, at(200), clock));
        assert_eq!(s.try_next_id().as_deref(), Some("D1-1"));
        assert_eq!(s.try_next_id().as_deref(), Some("D1-2"));
        now.store(199, Ordering::Relaxed);
        assert_eq!(s.try_next_id().as_deref(), Some("D1-3"));
        now.store(200, Ordering::Relaxed); // period_end itself: the period has ended
        assert_eq!(s.try_next_id(), None);
        let st = s.stats();
        assert_eq!((st.ids_served, st.discarded_ids), (3, 2));
        now.store(100, Ordering::Relaxed); // a clock stepped back brings nothing back
        assert_eq!(s.try_next_id(), None);
    }
}
