//! Segment ids through the [`IdService`]: a plain tag's numbers (own lane first, then the
//! others), a formatted tag's texts (slot 0's lane), runs, and the decode of a formatted id.
//!
//! **Why no id is handed out twice here.** This module only chooses an engine and passes the
//! request to it whole: every id comes from one engine's `next_ids`, `next_runs` or
//! `next_texts`, which leases from the database before handing anything out. A request asked of
//! a lane that fails is asked of the next lane only when the first answered an error, so no id
//! of the first was taken (`segment::lanes::router`).

use std::sync::Arc;

use crate::access::{Action, Credentials};
use crate::error::Error;
use crate::segment::{BizTag, DecodeError, FormattedIds, IdRuns, SegmentError, TagSpec};
use crate::service::quota::Caller;
use crate::shapes::Decoded;

use super::IdService;

/// Most ids one batch request may ask for as a list (and the snowflake batch and range
/// routes: their generator makes each id).
pub const MAX_COUNT: u64 = 100_000;

/// Most ids one segment range request may ask for: the answer is a few runs whatever the
/// count, and a client leasing this many at once uses them up in well under a second at the
/// speed of its local counter (a million ids is one tenth of a second at 10 M ids/s).
pub const MAX_RANGE_COUNT: u64 = 1_000_000;

/// Most ids one batch of a permuted tag holds: FF1 costs about 5.5 µs a code (release build),
/// so this is some 55 ms of one thread, spent off the request threads
/// ([`super::offload`]). A larger ask gets this many (a shorter batch, as at a period's end).
pub const MAX_PERMUTED_COUNT: usize = 10_000;

/// A permuted batch of at most this many ids is written on the request thread (under 0.1 ms of
/// FF1); a larger one is computed in [`super::offload`] first.
pub const PERMUTE_INLINE: usize = 16;

/// Ids of a period charged to a caller's share: what [`IdService::charge_period`] took.
struct PeriodCharge {
    /// The period's key.
    period: String,
    /// Ids taken of the share.
    taken: u64,
}

/// Ids of a plain tag (numbers) or of a formatted one (text).
pub enum Ids {
    /// A plain tag's ids, increasing.
    Numbers(Vec<i64>),
    /// A formatted tag's ids, of one period.
    Texts(FormattedIds),
    /// A strict tag's ids, increasing across every server (`crate::segment::strict`): the
    /// answer says so, so that a client hands them to the one call that asked.
    Strict(Vec<i64>),
}

/// `count` within `1..=max`, or `invalid_count`.
pub fn check_count(count: u64, max: u64) -> Result<(), Error> {
    if (1..=max).contains(&count) {
        Ok(())
    } else {
        Err(Error::InvalidCount(format!(
            "count must be an integer within 1..={max} (got {count})"
        )))
    }
}

/// Proof that the caller was admitted to take ids of one tag ([`IdService::admit_ids`]):
/// what Leaf's route holds between its fast path and the full request, so the caller is asked
/// about once (one hash for a token) and no id leaves without the check. Made only by
/// `admit_ids`.
#[derive(Debug, Clone)]
pub struct Admitted<'a> {
    tag: &'a str,
    /// The caller whose quotas the request is charged to (`None`: no limits).
    caller: Option<Arc<Caller>>,
}

impl Admitted<'_> {
    /// The tag the caller was admitted for.
    pub fn tag(&self) -> &str {
        self.tag
    }
}

impl IdService {
    /// Asks the policy whether `who` may take ids of `tag` ([`Action::TakeIds`]): the caller
    /// token's scope (`crate::access::callers`).
    #[inline]
    pub fn admit_ids<'a>(
        &self,
        who: &dyn Credentials,
        tag: &'a str,
    ) -> Result<Admitted<'a>, Error> {
        let caller = self.access.admit_ids(who, Some(tag))?;
        Ok(Admitted { tag, caller })
    }

    /// Charges `count` ids of `target` to the caller's rate (`crate::service::quota`): what it
    /// may take now (a shorter batch), or `quota_exhausted`. Free without limits.
    pub(super) fn charge_rate(
        &self,
        caller: Option<&Arc<Caller>>,
        target: &str,
        count: u64,
    ) -> Result<u64, Error> {
        match (caller, &self.quotas) {
            (Some(c), Some(q)) => Ok(q.take_rate(&c.name, target, &c.limits, count)?),
            _ => Ok(count),
        }
    }

    /// Charges `count` ids of a formatted tag's current period to the caller's share of it
    /// (`period_share`, over every server): the ids it may take (a shorter batch), or
    /// `quota_exhausted` until the next period. `None` without a share.
    async fn charge_period(
        &self,
        caller: Option<&Arc<Caller>>,
        spec: &TagSpec,
        count: u64,
    ) -> Result<Option<PeriodCharge>, Error> {
        let (Some(c), Some(q)) = (caller, &self.quotas) else {
            return Ok(None);
        };
        let (Some(share), Some(format)) = (c.limits.period_share, spec.format()) else {
            return Ok(None);
        };
        let now = jiff::Timestamp::now();
        // A stored spec's zone and period are checked when it is read: no error here but a
        // calendar out of range, which the engine answers the same way.
        let period = spec.period_at(now).map_err(|e| {
            Error::from(SegmentError::BadFormat {
                tag: spec.tag().clone(),
                why: e,
            })
        })?;
        let limit = share.of(format.max_sequence());
        let to_next = period
            .end
            .as_second()
            .saturating_sub(now.as_second())
            .max(1) as u64;
        let tag = spec.tag().as_str();
        let taken = q
            .take_period(&c.name, tag, &period.key, limit, count, to_next)
            .await?;
        Ok(Some(PeriodCharge {
            period: period.key,
            taken,
        }))
    }

    /// Gives back to the caller's rate `unused` ids charged and not handed out.
    pub(super) fn refund_rate(&self, caller: Option<&Arc<Caller>>, target: &str, unused: u64) {
        if let (Some(c), Some(q), true) = (caller, &self.quotas, unused > 0) {
            q.give_back_rate(&c.name, target, &c.limits, unused);
        }
    }

    /// The next id of a plain tag from the own engine's memory, without waiting; `None` when
    /// the tag is not cached, is formatted, or its buffers are empty (then
    /// [`Self::next_ids_admitted`]). Leaf's route tries this first, once the caller is admitted.
    #[inline]
    pub fn try_next_id(&self, admitted: &Admitted<'_>) -> Option<i64> {
        let tag = admitted.tag;
        let route = self.segment.as_ref()?;
        // A refused own lane serves not even buffered ids: `None` sends the caller to
        // `next_ids`, which answers `lane_mismatch` (one relaxed load while it serves).
        if route.is_refused() {
            return None;
        }
        // A caller with limits takes the full path, which charges its quotas once; without
        // limits this is one `None` check.
        if admitted.caller.is_some() {
            return None;
        }
        let id = route.own().try_next_id(tag)?;
        // With lanes, the own lane counts what it served on this path too (`GET /api/v1/lanes`):
        // one relaxed add, only on servers with lanes; a count for monitoring, no id depends on
        // it.
        if let Some(lanes) = route.lane_set() {
            lanes
                .own()
                .served
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Some(id)
    }

    /// What every segment id request passes before an engine is asked: the caller admitted for
    /// the tag, `count` within `1..=max`, the engine enabled, and the own lane not refused (a
    /// refused own lane hands out nothing, buffered ids included: `lane_mismatch`).
    fn route_for(&self, count: u64, max: u64) -> Result<&super::SegmentRoute, Error> {
        check_count(count, max)?;
        let route = self.segment_route()?;
        if let Some(why) = route.refused() {
            return Err(Error::LaneMismatch(why));
        }
        Ok(route)
    }

    /// Up to `count` ids of `tag`: numbers for a plain tag, from the own lane or the next that
    /// can serve; text for a formatted tag, from slot 0's lane. Fewer than `count` only when
    /// they are all there is (the engine's rule).
    pub async fn next_ids(
        &self,
        who: &impl Credentials,
        tag: &str,
        count: usize,
    ) -> Result<Ids, Error> {
        let admitted = self.admit_ids(who, tag)?;
        self.next_ids_admitted(who, admitted, count).await
    }

    /// [`Self::next_ids`] for a caller admitted already (`who`: its credentials, read again
    /// only for a formatted tag's request above the format's cap).
    pub async fn next_ids_admitted(
        &self,
        who: &impl Credentials,
        admitted: Admitted<'_>,
        count: usize,
    ) -> Result<Ids, Error> {
        let (tag, caller) = (admitted.tag, admitted.caller.as_ref());
        let route = self.route_for(count as u64, MAX_COUNT)?;
        if route.own().cached_spec(tag).is_none() {
            // The caller's rate first: a shorter batch when it holds fewer (ids charged and not
            // handed out are given back).
            let charged = self.charge_rate(caller, tag, count as u64)?;
            let numbers = match route.lane_set() {
                Some(lanes) => lanes.next_ids(tag, charged as usize).await,
                None => route.own().next_ids(tag, charged as usize).await,
            };
            let served = numbers.as_ref().map_or(0, |ids| ids.len() as u64);
            self.refund_rate(caller, tag, charged - served);
            match numbers {
                Ok(ids) => return Ok(Ids::Numbers(ids)),
                // Found formatted on the way (a first request): served as text below.
                Err(SegmentError::Formatted(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let tag = BizTag::parse(tag)?;
        let engine = route.home();
        let spec = engine
            .spec_of(&tag)
            .await?
            .ok_or_else(|| Error::unknown_tag(&tag))?;
        if spec.is_strict() {
            return self
                .strict_ids(caller, route, &tag, count)
                .await
                .map(Ids::Strict);
        }
        // The format's request share (issue 44): a caller without the admin credential gets at
        // most that much of a period per request, as a shorter batch (every client takes one,
        // as at a period's end). The credential is read only for a request above the cap.
        let cap = spec.format().map_or(u64::MAX, |f| f.request_cap());
        let mut count = match count as u64 > cap {
            true if self.access.admit(who, Action::AdminWrite).is_err() => cap as usize,
            _ => count,
        };
        if !spec.ordered() {
            // A permuted tag: at most `MAX_PERMUTED_COUNT` ids (a shorter batch, which every
            // client takes, as at a period's end).
            count = count.min(MAX_PERMUTED_COUNT);
        }
        // The caller's rate, then its share of the period (held over every server by the
        // database, `crate::service::quota`); what is not handed out is given back to both.
        let charged = self.charge_rate(caller, tag.as_str(), count as u64)?;
        let share = match self.charge_period(caller, &spec, charged).await {
            Ok(share) => share,
            Err(e) => {
                self.refund_rate(caller, tag.as_str(), charged);
                return Err(e);
            }
        };
        let asked = share.as_ref().map_or(charged, |s| s.taken);
        let texts = engine.next_texts(&spec, asked).await;
        let served = texts.as_ref().map_or(0, |t| t.len() as u64);
        self.refund_rate(caller, tag.as_str(), charged - served);
        if let (Some(share), Some(c), Some(q)) = (share, caller, &self.quotas) {
            q.give_back_period(&c.name, tag.as_str(), &share.period, share.taken - served)
                .await;
        }
        let mut texts = texts?;
        if spec.ordered() {
            return Ok(Ids::Texts(texts));
        }
        // A batch above `PERMUTE_INLINE` computed off the request threads, so FF1 never holds
        // an HTTP worker for long.
        if texts.len() > PERMUTE_INLINE {
            texts = super::offload::run(move || {
                texts.permute_now();
                texts
            })
            .await?;
        }
        Ok(Ids::Texts(texts))
    }

    /// Up to `count` ids of a plain `tag` as runs of consecutive ids; a formatted tag is
    /// `formatted_tag` (its ids are text).
    pub async fn next_runs(
        &self,
        who: &impl Credentials,
        tag: &str,
        count: u64,
    ) -> Result<IdRuns, Error> {
        let admitted = self.admit_ids(who, tag)?;
        let caller = admitted.caller.as_ref();
        let route = self.route_for(count, MAX_RANGE_COUNT)?;
        if route.own().cached_spec(tag).is_none() {
            let charged = self.charge_rate(caller, tag, count)?;
            let runs = match route.lane_set() {
                Some(lanes) => lanes.next_runs(tag, charged).await,
                None => route.own().next_runs(tag, charged).await,
            };
            let served = runs
                .as_ref()
                .map_or(0, |r| r.runs().iter().map(|run| run.len()).sum());
            self.refund_rate(caller, tag, charged.saturating_sub(served));
            match runs {
                Ok(runs) => return Ok(runs),
                // Found with a spec on the way (a first request): strict or formatted, below.
                Err(SegmentError::Formatted(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let tag = BizTag::parse(tag)?;
        let spec = route
            .home()
            .spec_of(&tag)
            .await?
            .ok_or_else(|| Error::unknown_tag(&tag))?;
        if !spec.is_strict() {
            return Err(SegmentError::Formatted(tag).into());
        }
        // A strict tag's ids are taken one by one by its owner: at most `MAX_COUNT` a request
        // (a shorter batch, which every client takes).
        let count = count.min(MAX_COUNT) as usize;
        let ids = self.strict_ids(caller, route, &tag, count).await?;
        Ok(IdRuns::strict(&ids))
    }

    /// Up to `count` ids of the strict `tag`, charged to the caller's rate: from its owner,
    /// this server or another through one hop (`super::strict`). Refused with lanes: a strict
    /// order over several regions' databases would need one owner over all of them, and every
    /// region would wait on it (`docs/guarantees.md`).
    async fn strict_ids(
        &self,
        caller: Option<&Arc<Caller>>,
        route: &super::SegmentRoute,
        tag: &BizTag,
        count: usize,
    ) -> Result<Vec<i64>, Error> {
        if route.lane_set().is_some() {
            return Err(Error::InvalidRequest(format!(
                "biz_tag \"{tag}\" is strict: strict tags are not served by servers with lanes"
            )));
        }
        let Some(strict) = &self.strict else {
            return Err(Error::InvalidRequest(format!(
                "biz_tag \"{tag}\" is strict, and this server does not serve strict tags"
            )));
        };
        let charged = self.charge_rate(caller, tag.as_str(), count as u64)?;
        let engine = route.own();
        let wait = engine.config().wait_timeout;
        let ids = strict.ids(engine, tag, charged as usize, wait).await;
        let served = ids.as_ref().map_or(0, |v| v.len() as u64);
        self.refund_rate(caller, tag.as_str(), charged - served);
        ids
    }

    /// A request forwarded by another server to this one, the owner of the strict `tag`
    /// (`super::strict`): served only with the owner row's key; no caller check (the entry
    /// server made it) and never forwarded again.
    pub async fn strict_forwarded(
        &self,
        tag: &BizTag,
        count: u64,
        peer_key: &str,
    ) -> Result<Vec<i64>, Error> {
        let route = self.route_for(count, MAX_COUNT)?;
        let Some(strict) = &self.strict else {
            return Err(Error::NotFound(
                "a strict hop on a server without strict tags".into(),
            ));
        };
        let engine = route.own();
        let wait = engine.config().wait_timeout;
        strict
            .serve_forwarded(engine, tag, count as usize, peer_key, wait)
            .await
    }

    /// A formatted id of `tag` read back into its period and sequence, by the format of the
    /// lane its ids come from. A permuted tag's ids are read only by a caller the policy admits
    /// ([`Action::DecodePermuted`]): the sequence is what the permutation hides.
    pub async fn decode(
        &self,
        who: &impl Credentials,
        tag: &BizTag,
        id: &str,
    ) -> Result<Decoded, Error> {
        // The tag's scope first, before anything about the tag is read: a caller without it
        // learns nothing, not even whether the tag exists.
        self.access.admit(who, Action::Decode(tag.as_str()))?;
        let engine = self.segment_route()?.home();
        let Some(spec) = engine.spec_of(tag).await? else {
            return Err(match engine.get_tag(tag).await? {
                Some(_) => Error::InvalidRequest(format!(
                    "biz_tag \"{tag}\" is not formatted: its ids are numbers"
                )),
                None => Error::unknown_tag(tag),
            });
        };
        if !spec.ordered() {
            self.access
                .admit(who, Action::DecodePermuted(tag.as_str()))?;
        }
        // A permuted id is read only with the key its database records for the key id: with
        // another key it would read as a wrong sequence (`segment::spec::binding`).
        engine.verify_key(&spec).await?;
        spec.decode(id).map_err(|e| match e {
            DecodeError::Format(e) => Error::InvalidId(e.to_string()),
            DecodeError::Segment(e) => e.into(),
            e @ DecodeError::NotFormatted(_) => Error::InvalidRequest(e.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::access::{AccessPolicy, Presented};
    use crate::config::Secret;
    use crate::segment::lanes::{Lane, LaneMode, LaneStore, Lanes};
    use crate::segment::{LaneRegistry, NewTag, SegmentAllocator, SegmentConfig, TagAdminStore};
    use crate::service::SegmentRoute;
    use crate::shapes::TagFormat;
    use crate::testing::MemoryStore;

    fn anyone() -> Presented {
        Presented::default()
    }

    fn lane(db: &Arc<MemoryStore>, slot: u8, own: bool) -> Lane {
        let store = LaneStore::new(db.clone(), LaneMode::Lane { slot, own });
        Lane::new(
            slot,
            format!("db{slot}"),
            SegmentAllocator::new(Arc::new(store), SegmentConfig::default()),
        )
    }

    fn service(route: SegmentRoute) -> IdService {
        let access = AccessPolicy {
            token: Some(Secret::new("t0k")),
            ..Default::default()
        };
        IdService::new(Some(route), None, access)
    }

    fn daily() -> TagFormat {
        serde_json::from_str(
            r#"{"prefix":"INV-","date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"UTC"}"#,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn counts_outside_the_limits_are_refused_before_any_engine() {
        let db = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let s = service(SegmentRoute::single(SegmentAllocator::new(
            db,
            SegmentConfig::default(),
        )));
        for count in [0, MAX_COUNT as usize + 1] {
            let Err(e) = s.next_ids(&anyone(), "t", count).await else {
                panic!("count {count} accepted");
            };
            assert_eq!(e.code(), "invalid_count");
        }
        let e = s
            .next_runs(&anyone(), "t", MAX_RANGE_COUNT + 1)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_count");
        let Ids::Numbers(ids) = s.next_ids(&anyone(), "t", 3).await.unwrap() else {
            panic!("a plain tag answered text");
        };
        assert_eq!(ids, vec![1, 2, 3]);
    }

    /// With lanes, a formatted tag's ids come from slot 0 and its decode reads slot 0's
    /// format, whichever lane is the server's own; a plain tag's ids come from the own lane.
    #[tokio::test]
    async fn formatted_tags_are_served_and_decoded_by_slot_zero() {
        let a = Arc::new(MemoryStore::default());
        let b = Arc::new(MemoryStore::default());
        // Region B's server: its own lane is slot 1, slot 0 is the other.
        let lanes = Lanes::new(lane(&b, 1, true), vec![lane(&a, 0, false)]);
        let s = service(SegmentRoute::lanes(Arc::new(lanes)));
        let json = serde_json::to_string(&daily()).unwrap();
        // Region A's servers recorded slot 0 in their database at their first lease.
        assert_eq!(a.claim_lane_slot(0).await.unwrap(), 0);
        for db in [&a, &b] {
            db.create_tag(&NewTag {
                biz_tag: "plain".into(),
                step: 10,
                max_id: 1,
                description: None,
            })
            .await
            .unwrap();
        }
        // Only slot 0 holds the format (as after a partition): the decode must read it there.
        a.create_formatted_tag(
            &NewTag {
                biz_tag: "inv".into(),
                step: 10,
                max_id: 1,
                description: None,
            },
            &json,
        )
        .await
        .unwrap();
        let Ids::Texts(texts) = s.next_ids(&anyone(), "inv", 2).await.unwrap() else {
            panic!("a formatted tag answered numbers");
        };
        let first = texts.first().unwrap();
        assert!(
            first.starts_with("INV-") && first.ends_with("000001"),
            "{first}"
        );
        let tag = BizTag::parse("inv").unwrap();
        let d = s.decode(&anyone(), &tag, &first).await.unwrap();
        assert_eq!(d.sequence, 1);
        let Ids::Numbers(ids) = s.next_ids(&anyone(), "plain", 1).await.unwrap() else {
            panic!("a plain tag answered text");
        };
        let (slot, _) = crate::segment::lanes::map::local(ids[0]).unwrap();
        assert_eq!(slot, 1, "a plain tag is served by the own lane first");
        // Leaf's fast path counts what the own lane served too (issue 43: it counted none).
        let before = s.lane_reports()[0].served;
        let mut fast = 0;
        for _ in 0..20 {
            if s.try_next_id(&s.admit_ids(&anyone(), "plain").unwrap())
                .is_some()
            {
                fast += 1;
            }
        }
        assert!(fast > 0, "the buffered ids are served on the fast path");
        assert_eq!(s.lane_reports()[0].served, before + fast);
        let e = s.next_runs(&anyone(), "inv", 5).await.unwrap_err();
        assert_eq!(e.code(), "formatted_tag");
    }

    /// Strict tags and lanes do not mix: a create is refused, and a strict tag found on a lane
    /// database (written by hand, or before lanes were configured) serves nothing.
    #[tokio::test]
    async fn a_server_with_lanes_neither_creates_nor_serves_a_strict_tag() {
        let a = Arc::new(MemoryStore::default());
        let b = Arc::new(MemoryStore::default());
        let lanes = Lanes::new(lane(&a, 0, true), vec![lane(&b, 1, false)]);
        let s = service(SegmentRoute::lanes(Arc::new(lanes)));
        let new = NewTag {
            biz_tag: "msgs".into(),
            step: 10,
            max_id: 1,
            description: None,
        };
        let e = s.create_strict_tag(&new).await.unwrap_err();
        assert_eq!(e.code(), "invalid_request", "{e}");
        a.create_formatted_tag(&new, crate::segment::STRICT_SPEC)
            .await
            .unwrap();
        for e in [
            s.next_ids(&anyone(), "msgs", 1).await.err().unwrap(),
            s.next_runs(&anyone(), "msgs", 1).await.unwrap_err(),
        ] {
            assert_eq!(e.code(), "invalid_request", "{e}");
            assert!(e.to_string().contains("strict"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_plain_tag_has_nothing_to_decode_and_an_unknown_tag_is_named() {
        let db = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let s = service(SegmentRoute::single(SegmentAllocator::new(
            db,
            SegmentConfig::default(),
        )));
        let t = BizTag::parse("t").unwrap();
        let e = s.decode(&anyone(), &t, "1").await.unwrap_err();
        assert_eq!(e.code(), "invalid_request");
        let nope = BizTag::parse("nope").unwrap();
        let e = s.decode(&anyone(), &nope, "1").await.unwrap_err();
        assert_eq!(e.code(), "unknown_biz_tag");
    }

    /// A clash found after ids were buffered (a partition healed): from then on no route
    /// serves the tag, not even Leaf's fast path from the ids already in memory.
    #[tokio::test]
    async fn a_refused_own_lane_serves_not_even_buffered_ids() {
        use crate::segment::lanes::{LaneClaims, claims::Refusal};
        let db = Arc::new(MemoryStore::with_rows(&[("t", 1, 1000)]));
        let claims = LaneClaims::new();
        let s = service(
            SegmentRoute::single(SegmentAllocator::new(db, SegmentConfig::default()))
                .with_claims(claims.clone()),
        );
        let Ids::Numbers(ids) = s.next_ids(&anyone(), "t", 2).await.unwrap() else {
            panic!("a plain tag answered text");
        };
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(
            s.try_next_id(&s.admit_ids(&anyone(), "t").unwrap()),
            Some(3),
            "buffered ids served from memory"
        );
        let _ = claims.refuse(Refusal::Clash {
            slot: 0,
            detail: "two databases".into(),
        });
        assert_eq!(s.try_next_id(&s.admit_ids(&anyone(), "t").unwrap()), None);
        for e in [
            s.next_ids(&anyone(), "t", 1).await.err().unwrap(),
            s.next_runs(&anyone(), "t", 1).await.unwrap_err(),
        ] {
            assert_eq!(e.code(), "lane_mismatch");
        }
    }
}
