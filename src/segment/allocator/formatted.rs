//! Formatted tags (`crate::shapes`): ids as text, each period leased from a row of its own.
//!
//! A formatted tag `orders` never serves from its own `leaf_alloc` row. Each period of it is an
//! ordinary row, `orders@20261127` ([`PeriodRow`], named by the tag's [`TagSpec`]), created on
//! first use at the tag's start value (the parent row's `max_id` when it was created) with the
//! parent's step, and leased through the same buffers, durability gate and regression guard as
//! any tag. Why no id is handed out twice:
//!
//! - within a period, the sequence is the period row's ids: unique by the segment engine's own
//!   guarantee, on every server;
//! - the period's key is written in the id ([`TagFormat::validate`] refuses a format whose text
//!   would not name its period), so two periods never write the same text;
//! - a sequence past the width is refused ([`SegmentError::SequenceExhausted`]), never widened
//!   nor wrapped;
//! - after taking ids, the clock is read again: ids of a period that ended meanwhile are
//!   dropped and the request is served from the new period, so a server never hands out an id
//!   of a period that has ended by its clock. Two servers whose clocks differ near midnight may
//!   serve either period; each id still names its own.
//!
//! A period's row is never deleted, so a clock stepped back into an old period leases above
//! what that period issued. Buffers of ended periods are dropped when the tag moves on.
//!
//! Two sequence modes (issue 35) change only which sequence numbers become ids, never where
//! they come from:
//!
//! - **permuted**: the id shows `P(sequence)`, `P` FF1 under the tag's key with the period's
//!   frozen tweak ([`TagSpec::tweak`], `crate::shapes::permute`). `P` is a bijection of the
//!   width's domain, so distinct sequences give distinct ids; a server without the key serves
//!   nothing of the tag ([`SegmentError::KeyUnavailable`]), never an unpermuted id;
//! - **gapped**: a batch of `n` ids takes `U1 + .. + Un` sequence numbers and hands out the
//!   ones at the running sums (each `U` uniform in `1..=2*mean-1` from the thread's CSPRNG), so
//!   the ids are a subset of unique, increasing sequence numbers: unique and increasing too.

use std::sync::Arc;

use jiff::Timestamp;

use super::SegmentAllocator;
use crate::segment::biz_tag::BizTag;
use crate::segment::buffer::LeaseCap;
use crate::segment::error::SegmentError;
use crate::segment::runs::IdRuns;
use crate::segment::spec::{PeriodRow, Shape, SpecError, TagSpec};
use crate::segment::store::{FormattedCreate, StoreError};
use crate::segment::tag_rules::NewTag;
use crate::shapes::{Reset, TagFormat};

/// How full a formatted tag's current period is.
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodFill {
    /// The formatted tag.
    pub biz_tag: String,
    /// Its current period's key.
    pub period: String,
    /// Leased share of the period's width, 0 to 1.
    pub used: f64,
}

/// Ids of a formatted tag, all of one period: its sequence numbers, written as text when they
/// are read ([`Self::for_each`]), so a batch allocates no string per id.
#[derive(Debug, Clone)]
pub struct FormattedIds {
    /// The tag's spec (a formatted one).
    spec: Arc<TagSpec>,
    /// The prefix and date part every id of the period starts with.
    head: String,
    /// The sequence numbers, as increasing runs `(first, last)`, all within the width.
    seqs: Vec<(u64, u64)>,
    /// The period's permutation tweak ([`TagSpec::tweak`]).
    tweak: Arc<[u8]>,
    /// The period's key (empty without a reset).
    pub period: String,
    /// When the period ends: a client drops what it holds of these ids then.
    pub period_end: Timestamp,
    /// A permuted batch's values, computed ahead ([`Self::permute_now`]), in issue order;
    /// `None` until then (and always for an unpermuted tag).
    permuted: Option<Vec<u64>>,
}

impl FormattedIds {
    /// How many ids.
    pub fn len(&self) -> usize {
        self.seqs.iter().map(|&(a, b)| (b - a + 1) as usize).sum()
    }

    /// Never true: a batch holds at least one id.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Whether the ids are in issue order (all but a permuted tag's).
    pub fn ordered(&self) -> bool {
        self.spec.ordered()
    }

    /// Whether writing these ids runs the permutation (a permuted tag's batch not computed
    /// ahead by [`Self::permute_now`]): FF1 costs microseconds a code, so a large batch is
    /// computed off the request threads first (`crate::service`).
    pub fn needs_permuting(&self) -> bool {
        self.permuted.is_none() && !self.spec.ordered()
    }

    /// Computes a permuted batch's values now, so that writing the ids runs no FF1. CPU-bound
    /// for the whole batch: call it where it holds no request thread.
    pub fn permute_now(&mut self) {
        if !self.needs_permuting() {
            return;
        }
        let mut values = Vec::with_capacity(self.len());
        self.each_value(|v| {
            values.push(v);
            Ok::<_, ()>(())
        })
        .ok();
        self.permuted = Some(values);
    }

    /// Calls `f` with each value the ids show (the permuted sequence of a permuted tag), in
    /// issue order.
    fn each_value<E>(&self, mut f: impl FnMut(u64) -> Result<(), E>) -> Result<(), E> {
        if let Some(values) = &self.permuted {
            return values.iter().try_for_each(|&v| f(v));
        }
        let permutation = match self.spec.shape() {
            Shape::Text(shape) => shape.permutation(),
            Shape::Plain => None,
        };
        for &(first, last) in &self.seqs {
            for seq in first..=last {
                let value = match permutation {
                    None => seq,
                    // An error is never expected (see `Permutation::encrypt`); the id is then
                    // skipped, a gap, never written unpermuted.
                    Some(p) => match p.encrypt(&self.tweak, seq) {
                        Ok(v) => v,
                        Err(_) => continue,
                    },
                };
                f(value)?;
            }
        }
        Ok(())
    }

    /// Calls `f` with each id, in issue order, written into one reused buffer. A permuted
    /// tag's ids show the permuted sequence (its key was checked when the batch was made).
    pub fn for_each<E>(&self, mut f: impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
        // A batch of texts is made from a formatted spec only.
        let Shape::Text(shape) = self.spec.shape() else {
            return Ok(());
        };
        let format = shape.format();
        let mut buf = String::with_capacity(format.len());
        self.each_value(|value| {
            buf.clear();
            buf.push_str(&self.head);
            // Every sequence here was checked against the width when the batch was made, and
            // a permuted value lies in the same domain.
            if format.write_tail(value, &mut buf).is_ok() {
                f(&buf)?;
            }
            Ok(())
        })
    }

    /// The first id.
    pub fn first(&self) -> Option<String> {
        let mut out = None;
        let _ = self.for_each(|s| {
            out = Some(s.to_owned());
            Err(())
        });
        out
    }
}

impl SegmentAllocator {
    /// The spec of `tag` if it is a tag with a stored spec (today: a formatted tag) that this
    /// server knows of; `None` for a plain tag, or one not known yet.
    pub fn cached_spec(&self, tag: &str) -> Option<Arc<TagSpec>> {
        self.inner.specs.get(tag)
    }

    /// The spec of `tag`: the cached one, else the database's (remembered), else `None` (a
    /// plain tag, no tag at all, or a deleted formatted tag). A stored spec this server cannot
    /// use is [`SegmentError::BadFormat`].
    ///
    /// A stored format is used only while the tag's `leaf_alloc` row exists (read after the
    /// format: the two are written in one transaction, so a format read with no row after it
    /// is a deleted tag's). A deleted formatted tag keeps its format for good (its name comes
    /// back only with it), but serves nothing and decodes nothing: `None`, which every caller
    /// answers as `unknown_biz_tag`, like a deleted plain tag, after a restart or on a server
    /// that never saw the tag as well.
    pub async fn spec_of(&self, tag: &BizTag) -> Result<Option<Arc<TagSpec>>, SegmentError> {
        if let Some(s) = self.cached_spec(tag.as_str()) {
            return Ok(Some(s));
        }
        let store = &self.inner.store;
        let json = store
            .get_format(tag.as_str())
            .await
            .map_err(|e| SegmentError::from_store(e, tag))?;
        let Some(json) = json else {
            return Ok(None);
        };
        let row = store
            .get_tag(tag.as_str())
            .await
            .map_err(|e| SegmentError::from_store(e, tag))?;
        if row.is_none_or(|r| r.biz_tag != tag.as_str()) {
            return Ok(None);
        }
        self.inner
            .specs
            .remember(tag.as_str(), &json, &self.inner.config.keys)
            .map(Some)
            .map_err(|why| SegmentError::BadFormat {
                tag: tag.clone(),
                why,
            })
    }

    /// Creates a formatted tag: its spec and its row (whose `max_id` is the start value of
    /// every period) in one store transaction
    /// ([`TagAdminStore::create_formatted_tag`](crate::segment::TagAdminStore::create_formatted_tag)),
    /// so no server ever sees the row without the spec, and a create that loses a race (to a
    /// plain create of the name, or another formatted one) leaves no format behind. The spec
    /// of a name is fixed for good: the same format again is accepted (a retried create, or a
    /// deleted formatted tag created again), another one is [`FormatConflict::Differs`]. The
    /// spec is known to this server at once.
    pub async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &TagFormat,
    ) -> Result<crate::segment::TagRow, FormatConflict> {
        if let Some(p) = &format.permute
            && self.inner.config.keys.get(&p.key_id).is_none()
        {
            // The format is fixed for good: a tag under a key no server holds could never
            // serve. The key comes first, from the configuration.
            return Err(SpecError::KeyMissing {
                key_id: p.key_id.clone(),
            }
            .into());
        }
        if let Some(p) = &format.permute {
            // Bound before anything is written: a tag is created only under the key its
            // database records for the key id (or records first now).
            self.bind_key_for_new_tag(&p.key_id).await?;
        }
        let json = TagSpec::stored_json(format)?;
        match self.inner.store.create_formatted_tag(tag, &json).await? {
            FormattedCreate::Created(row) => {
                self.remember_specs([(tag.biz_tag.clone(), json)]);
                Ok(row)
            }
            FormattedCreate::OtherFormat(stored) => Err(FormatConflict::Differs(stored)),
        }
    }

    /// Creates a strict tag: its row and the strict spec ([`crate::segment::STRICT_SPEC`]) in
    /// one transaction, as a formatted tag's row and format (so the same rules hold: the name
    /// keeps its spec for good, a plain create of it is refused, races are settled by the
    /// row's key).
    pub async fn create_strict_tag(
        &self,
        tag: &NewTag,
    ) -> Result<crate::segment::TagRow, FormatConflict> {
        let json = crate::segment::STRICT_SPEC;
        match self.inner.store.create_formatted_tag(tag, json).await? {
            FormattedCreate::Created(row) => {
                self.remember_specs([(tag.biz_tag.clone(), json.to_owned())]);
                Ok(row)
            }
            FormattedCreate::OtherFormat(stored) => Err(FormatConflict::Differs(stored)),
        }
    }

    /// Per formatted tag this server knows: its current period (by this server's clock) and
    /// the share of the period's width leased so far (0 before the period's first lease here),
    /// ordered by tag. For `/metrics` and the monitor routes.
    pub fn period_fills(&self) -> Vec<PeriodFill> {
        let now = Timestamp::now();
        let specs = self.inner.specs.all();
        let mut out: Vec<PeriodFill> = specs
            .iter()
            .filter_map(|(tag, spec)| {
                let format = spec.format()?;
                let period = spec.period_at(now).ok()?;
                let row = spec.period_row(&period.key);
                let leased = self.cached(row.as_str()).map_or(0, |b| b.leased_to());
                // `leased_to` is one past the last id leased; the sequence starts at the tag's
                // start value, so this over-counts by the start (1 by default): conservative.
                let used = (leased.max(1) - 1) as f64 / format.max_sequence() as f64;
                Some(PeriodFill {
                    biz_tag: tag.clone(),
                    period: period.key,
                    used: used.min(1.0),
                })
            })
            .collect();
        out.sort_by(|a, b| a.biz_tag.cmp(&b.biz_tag));
        out
    }

    /// Records specs read from the database (a refresh, or a first request).
    pub(super) fn remember_specs(&self, found: impl IntoIterator<Item = (String, String)>) {
        self.inner
            .specs
            .remember_all(found, &self.inner.config.keys);
    }

    /// Up to `count` ids of the formatted tag of `spec`, all of the period current by this
    /// server's clock.
    pub async fn next_texts(
        &self,
        spec: &Arc<TagSpec>,
        count: u64,
    ) -> Result<FormattedIds, SegmentError> {
        self.next_texts_at(spec, count, &Timestamp::now).await
    }

    /// [`Self::next_texts`] by the clock `now` (tests drive it by hand).
    pub(crate) async fn next_texts_at(
        &self,
        spec: &Arc<TagSpec>,
        count: u64,
        now: &(dyn Fn() -> Timestamp + Sync),
    ) -> Result<FormattedIds, SegmentError> {
        let tag = spec.tag();
        let bad = |why: SpecError| SegmentError::BadFormat {
            tag: tag.clone(),
            why,
        };
        let format = spec
            .format()
            .ok_or_else(|| bad(SpecError::NotFormatted { tag: tag.clone() }))?;
        // Before any id is taken: a permuted tag is never served without its key, nor with a
        // key its database does not record for the key id (`spec::binding`).
        spec.verified_permutation(&*self.inner.store, self.inner.config.load_timeout)
            .await?;
        // Three tries: a request straddles at most one period end per try.
        for _ in 0..3 {
            let current = spec.current(now()).map_err(bad)?;
            let (period, row) = (&current.period, &current.row);
            let gaps = format.gaps.map(|g| draw_gaps(g.mean, count));
            let take = gaps.as_ref().map_or(count, |g| g.iter().sum());
            let runs = self.take_period(spec, row, take).await?;
            if now() >= period.end {
                // The period ended while the ids were taken: they are dropped (a gap in that
                // period), and the request is served from the new one.
                self.forget(row.as_str());
                continue;
            }
            let max = format.max_sequence();
            // Sequence numbers past the width are never written (the ids leased for them are
            // a gap): the period is exhausted, it never widens nor wraps.
            let mut seqs: Vec<(u64, u64)> = runs
                .runs()
                .iter()
                .filter(|r| r.first >= 1 && (r.first as u64) <= max)
                .map(|r| (r.first as u64, (r.last as u64).min(max)))
                .collect();
            if let Some(gaps) = &gaps {
                seqs = pick_at_gaps(&seqs, gaps);
            }
            if seqs.is_empty() {
                if format.reset == Reset::Never {
                    // No later period will ever serve: spent for good, like a plain tag at
                    // the end of its range (409 `biz_tag_exhausted`), never a 503 asking to
                    // retry in thousands of years.
                    return Err(SegmentError::Exhausted);
                }
                let left = period.end.duration_since(now()).as_secs();
                return Err(SegmentError::SequenceExhausted {
                    period: period.key.clone(),
                    next_start: period.end.to_string(),
                    retry_after_secs: left.max(1) as u64,
                });
            }
            return Ok(FormattedIds {
                spec: spec.clone(),
                head: current.head.clone(),
                seqs,
                tweak: current.tweak.clone(),
                period: period.key.clone(),
                period_end: period.end,
                permuted: None,
            });
        }
        Err(SegmentError::NotReady {
            retry_after_secs: 1,
        })
    }

    /// Ids of one period's row, creating the row on first use.
    async fn take_period(
        &self,
        spec: &TagSpec,
        row: &PeriodRow,
        count: u64,
    ) -> Result<IdRuns, SegmentError> {
        if self.cached(row.as_str()).is_none() {
            // Bounded like any request's lookup (`SegmentAllocator::buffer`): a database call
            // whose answer never comes must not hold the request.
            tokio::time::timeout(
                self.inner.config.wait_timeout,
                self.create_period_row(spec, row),
            )
            .await
            .map_err(|_| SegmentError::NotReady {
                retry_after_secs: 1,
            })??;
        }
        self.take_into(row.as_str(), count, IdRuns::new()).await
    }

    /// Creates the row of a period (idempotent: another server may have made it first), at the
    /// tag's start value, then caches its buffer with every lease bounded by a share of what is
    /// left of the period ([`LeaseCap`]: one server's burst cannot lease the period away from
    /// the others, and a crash loses at most that share).
    ///
    /// The row is stored with step 1, so the store's floor (a lease takes at least the row's
    /// step) never raises the engine's bounded ask; the tag's own step is the first lease's
    /// size instead, capped at the same share of the whole period. Rows made before this
    /// carry the tag's step, which stays their floor until their period ends.
    async fn create_period_row(&self, spec: &TagSpec, row: &PeriodRow) -> Result<(), SegmentError> {
        let tag = spec.tag();
        let store = &self.inner.store;
        // The parent row never leases (a formatted tag serves from its periods), so its
        // `max_id` stays the start value it was created with, and its step is the DBA's.
        let parent = store
            .get_tag(tag.as_str())
            .await
            .map_err(SegmentError::Store)?
            .ok_or_else(|| SegmentError::UnknownTag(tag.clone()))?;
        let start = parent.max_id;
        if store
            .get_tag(row.as_str())
            .await
            .map_err(SegmentError::Store)?
            .is_none()
        {
            let new = NewTag {
                biz_tag: row.as_str().to_owned(),
                step: 1,
                max_id: start,
                description: Some(format!("period of {tag}")),
            };
            match store.create_tag(&new).await {
                Ok(_) | Err(StoreError::AlreadyExists) => {}
                Err(e) => return Err(SegmentError::from_store(e, row.as_biz_tag())),
            }
        }
        // The exclusive end: one past the largest sequence, saturating at `i64::MAX` (a width of
        // 19 digits allows every positive `i64`; `+ 1` past it would overflow).
        let end = spec.format().map_or(i64::MAX, |f| {
            i64::try_from(f.max_sequence()).map_or(i64::MAX, |m| m.saturating_add(1))
        });
        let cap = LeaseCap::new(start, end, parent.step);
        self.cache_row(row.as_biz_tag(), Some(cap))?;
        self.forget_other_periods(tag, row);
        Ok(())
    }

    /// Drops the buffers of `tag`'s periods other than `current` (ended ones, once a request
    /// made the current period's): memory, `/cache` and metrics stay bounded by tags, not by
    /// days. Safe for uniqueness: a dropped buffer's high-water mark is kept (`retire`), and a
    /// request that still reads an ended period (a clock near its end) finds it gone or drops
    /// its ids itself (the end check after taking); a clock stepped back into an ended period
    /// makes its buffer again above that mark and above its row's `max_id`.
    fn forget_other_periods(&self, tag: &BizTag, current: &PeriodRow) {
        let ended: Vec<String> = self
            .inner
            .tags
            .load()
            .iter()
            .map(|(name, _)| &**name)
            .filter(|n| *n != current.as_str() && PeriodRow::parent_of(n) == Some(tag.as_str()))
            .map(str::to_owned)
            .collect();
        for name in ended {
            if let Some(buf) = self.cached(&name) {
                self.record_ended(tag.as_str(), &buf.snapshot());
            }
            self.forget(&name);
        }
    }
}

/// The most sequence numbers one gapped batch takes: a batch of `n` ids with mean gap `m`
/// takes about `n * m`, so large batches of wide gaps are cut to fewer ids (a batch may hold
/// fewer ids than asked, as at a period's end).
pub const MAX_GAPPED_TAKE: u64 = 1_000_000;

/// The gaps of a gapped batch of up to `count` ids: each uniform in `1..=2*mean-1` from the
/// thread's CSPRNG, as many as fit [`MAX_GAPPED_TAKE`] (at least one).
fn draw_gaps(mean: u32, count: u64) -> Vec<u64> {
    use rand::Rng;
    let mut rng = rand::rng();
    let top = 2 * u64::from(mean) - 1;
    let mut out = Vec::new();
    let mut total = 0u64;
    while (out.len() as u64) < count {
        let g = rng.random_range(1..=top);
        if total + g > MAX_GAPPED_TAKE && !out.is_empty() {
            break;
        }
        total += g;
        out.push(g);
    }
    out
}

/// The sequence numbers at the running sums of `gaps` through `runs` (increasing, disjoint):
/// the first id is the `gaps[0]`-th number of the runs, the next `gaps[1]` further, and so
/// on; gaps past the runs' end are dropped. A subset of the runs, so unique and increasing.
fn pick_at_gaps(runs: &[(u64, u64)], gaps: &[u64]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(gaps.len());
    let mut gaps = gaps.iter();
    // How far past the current position the next pick lies (1 = the next number).
    let Some(mut ahead) = gaps.next().copied() else {
        return out;
    };
    for &(first, last) in runs {
        let mut at = first;
        loop {
            // Numbers left in this run from `at`: last - at + 1.
            let left = last - at + 1;
            if ahead > left {
                ahead -= left;
                break;
            }
            let pick = at + ahead - 1;
            out.push((pick, pick));
            match gaps.next() {
                Some(&g) => ahead = g,
                None => return out,
            }
            if pick == last {
                break;
            }
            at = pick + 1;
        }
    }
    out
}

/// Why a formatted tag was not created.
#[derive(Debug, thiserror::Error)]
pub enum FormatConflict {
    /// The store refused (the tag exists, the database is down...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The name had another format already (kept for good: a deleted formatted tag keeps its
    /// format, because ids written under two formats could read alike).
    #[error("this biz_tag has another format for good: {0}")]
    Differs(String),
    /// The spec is refused (no key for a permuted format, JSON that cannot be written).
    #[error(transparent)]
    Spec(#[from] SpecError),
}
