//! [`Lanes`]: one segment engine per lane, the server's own lane first. A request is served by
//! the first lane that can; a lane that cannot (its database unreachable, its lease failing, the
//! tag not there yet) passes the request to the next, at that lane's latency, and the own lane
//! serves again as soon as it can: it is asked first every time, and its engine answers at once
//! while its lease is known to fail (the fail-fast rule), so a lane that is down costs a request
//! little.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::LaneClaims;

use crate::segment::{IdRuns, SegmentAllocator, SegmentError};
use crate::telemetry::LogLimiter;

/// One lane: its slot, a name for people (the database URL, password hidden) and its engine.
pub struct Lane {
    /// The slot ([`super::map`]).
    pub slot: u8,
    /// The database, redacted.
    pub name: String,
    /// The engine leasing from it (through a [`super::LaneStore`]).
    pub engine: SegmentAllocator,
    /// Requests this lane served.
    pub served: AtomicU64,
    /// Requests this lane passed to the next one.
    pub passed: AtomicU64,
}

impl Lane {
    /// A lane.
    pub fn new(slot: u8, name: String, engine: SegmentAllocator) -> Self {
        Self {
            slot,
            name,
            engine,
            served: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        }
    }
}

/// The lanes: the server's own, asked first, and the others in the order configured. "Own
/// first" is this type's shape, not an index: [`Lanes::in_order`] yields the own lane, then the
/// others, and [`Lanes::others`] never holds the own lane.
pub struct Lanes {
    own: Lane,
    others: Vec<Lane>,
    log: LogLimiter,
    /// The lane databases' claims ([`super::LaneClaims`]), when the lanes' stores joined them.
    claims: Option<Arc<LaneClaims>>,
}

/// Whether another lane may serve what this one could not: its database or lease failed, or it
/// does not know the tag (created while it was unreachable: the repair adds it later; unless
/// it holds the tag's tombstone, checked by the caller). A refusal every lane would give (an
/// invalid tag, an exhausted one, a formatted one on the range route) is answered at once.
///
/// A lane mismatch (`own`: the server's own lane) is never passed on: a refused own lane means
/// this server is misconfigured or its slot clashes, and serving from the others would hide it
/// (the caller fails over to a server that is ready). Another lane's mismatch only takes that
/// lane out: it can never serve, so the next one is asked.
fn pass_on(e: &SegmentError, own: bool) -> bool {
    match e {
        SegmentError::LaneMismatch(_) => !own,
        _ => matches!(
            e,
            SegmentError::NotReady { .. }
                | SegmentError::LossyDatabase(_)
                | SegmentError::Store(_)
                | SegmentError::UnknownTag(_)
        ),
    }
}

impl Lanes {
    /// The server's own lane and the others, in the order to ask them after it.
    pub fn new(own: Lane, others: Vec<Lane>) -> Self {
        Self {
            own,
            others,
            log: LogLimiter::new(crate::telemetry::REPEAT_LOG_INTERVAL),
            claims: None,
        }
    }

    /// These lanes, whose stores joined `claims` ([`super::LaneStore::joined`]): a refused own
    /// lane refuses every request.
    pub fn with_claims(mut self, claims: Arc<LaneClaims>) -> Self {
        self.claims = Some(claims);
        self
    }

    /// The lane databases' claims, when joined.
    pub fn claims(&self) -> Option<&Arc<LaneClaims>> {
        self.claims.as_ref()
    }

    /// The server's own lane.
    pub fn own(&self) -> &Lane {
        &self.own
    }

    /// The other lanes, in the order they are asked after the own one.
    pub fn others(&self) -> &[Lane] {
        &self.others
    }

    /// Every lane in the order a request asks them: the own lane first.
    pub fn in_order(&self) -> impl Iterator<Item = &Lane> {
        std::iter::once(&self.own).chain(&self.others)
    }

    /// The lane of slot 0, where formatted tags lease.
    pub fn slot_zero(&self) -> Option<&Lane> {
        self.in_order().find(|l| l.slot == 0)
    }

    /// Asks each lane in turn with `f` until one serves; the first lane's error when none does.
    async fn first<T, F, Fut>(&self, tag: &str, f: F) -> Result<T, SegmentError>
    where
        F: Fn(SegmentAllocator) -> Fut,
        Fut: std::future::Future<Output = Result<T, SegmentError>>,
    {
        // A refused own lane (a mismatch, or a clash of slots found after its ids were leased):
        // nothing is served, not even ids already buffered, which may repeat another
        // database's of the same slot.
        if let Some(why) = self.claims.as_ref().and_then(|c| c.refused_because()) {
            return Err(SegmentError::LaneMismatch(why));
        }
        let mut first_error = None;
        for (i, lane) in self.in_order().enumerate() {
            // An engine is an `Arc` inside: cloned per ask, so the future owns it.
            match f(lane.engine.clone()).await {
                Ok(v) => {
                    lane.served.fetch_add(1, Ordering::Relaxed);
                    return Ok(v);
                }
                // The tombstone wins at once: a lane that lacks the tag because it was deleted
                // there does not pass it on, so a tag deleted in one region during a partition
                // is not served by another lane that has not heard of the delete yet.
                Err(SegmentError::UnknownTag(t))
                    if matches!(lane.engine.store().tombstone(tag).await, Ok(Some(_))) =>
                {
                    return Err(SegmentError::UnknownTag(t));
                }
                Err(e) if pass_on(&e, i == 0) => {
                    lane.passed.fetch_add(1, Ordering::Relaxed);
                    if let Some(held_back) = self.log.allow("lane passed a request on") {
                        tracing::warn!(slot = lane.slot, lane = %lane.name, error = %e, held_back,
                            "lane could not serve: asking the next lane");
                    }
                    first_error.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(first_error.unwrap_or(SegmentError::NotReady {
            retry_after_secs: 1,
        }))
    }

    /// Up to `count` ids of `tag` from the first lane that serves (all from one lane).
    pub async fn next_ids(&self, tag: &str, count: usize) -> Result<Vec<i64>, SegmentError> {
        self.first(tag, |e| async move { e.next_ids(tag, count).await })
            .await
    }

    /// Up to `count` ids of `tag` as runs, from the first lane that serves.
    pub async fn next_runs(&self, tag: &str, count: u64) -> Result<IdRuns, SegmentError> {
        self.first(tag, |e| async move { e.next_runs(tag, count).await })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::segment::lanes::map;
    use crate::segment::lanes::repair::Mirror;
    use crate::segment::lanes::{LaneMode, LaneStore};
    use crate::segment::{BizTag, NewTag, SegmentConfig, TagAdminStore};
    use crate::testing::MemoryStore;

    fn lane(db: &Arc<MemoryStore>, slot: u8, own: bool) -> Lane {
        let store = LaneStore::new(db.clone(), LaneMode::Lane { slot, own });
        // A fixed step of 100: a lane's buffers run dry within a few rounds of its database
        // going away.
        let config = SegmentConfig {
            wait_timeout: std::time::Duration::from_millis(200),
            policy: crate::segment::StepPolicy {
                max_step: 100,
                ..Default::default()
            },
            ..Default::default()
        };
        Lane::new(
            slot,
            format!("db{slot}"),
            SegmentAllocator::new(Arc::new(store), config),
        )
    }

    /// Two regions, each asking its own lane first: ids from both, while each lane in turn is
    /// down, never repeat; each id's slot bits name the lane that served it, and ids of one
    /// lane increase per server.
    #[tokio::test]
    async fn two_regions_pass_requests_on_and_never_repeat_an_id() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let region_a = Lanes::new(lane(&a, 0, true), vec![lane(&b, 1, false)]);
        let region_b = Lanes::new(lane(&b, 1, true), vec![lane(&a, 0, false)]);
        let mut seen = HashSet::new();
        let mut last = [[0i64; 2]; 2];
        for round in 0..60 {
            // Lane A down for rounds 20..40: both regions go on through lane B.
            a.failing
                .store((20..40).contains(&round), Ordering::Relaxed);
            for (r, lanes) in [&region_a, &region_b].into_iter().enumerate() {
                let ids = lanes.next_ids("t", 37).await.unwrap();
                for id in ids {
                    assert!(seen.insert(id), "{id} twice");
                    let (slot, _) = map::local(id).unwrap();
                    let l = &mut last[r][usize::from(slot)];
                    assert!(
                        id > *l,
                        "lane {slot} went back on region {r}: {id} after {l}"
                    );
                    *l = id;
                }
            }
        }
        // Lane A served from its buffers for a while after its database went, then passed on.
        assert!(region_a.own().passed.load(Ordering::Relaxed) >= 1);
        assert!(region_a.others()[0].served.load(Ordering::Relaxed) >= 1);
        // Both lanes down: what the buffers hold, then an error, never an id from nowhere.
        b.failing.store(true, Ordering::Relaxed);
        a.failing.store(true, Ordering::Relaxed);
        let mut failed = false;
        for _ in 0..20 {
            match region_a.next_ids("t", 1000).await {
                Ok(ids) => ids
                    .into_iter()
                    .for_each(|id| assert!(seen.insert(id), "{id} twice")),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "ids kept coming with both lanes down");
    }

    /// Tags across lanes: a create mirrored where reachable, the unreachable lane named and
    /// repaired when it answers; a delete made while a lane was away is carried there by the
    /// repair (the tombstone wins), never undone.
    #[tokio::test]
    async fn tags_follow_across_lanes_and_tombstones_win() {
        let a = Arc::new(MemoryStore::default());
        let b = Arc::new(MemoryStore::default());
        let lanes = Lanes::new(lane(&a, 0, true), vec![lane(&b, 1, false)]);
        let tag = BizTag::parse("orders").unwrap();
        let new = NewTag {
            biz_tag: "orders".to_owned(),
            step: 100,
            max_id: 5000,
            description: None,
        };
        b.failing.store(true, Ordering::Relaxed);
        a.create_tag(&new).await.unwrap();
        let unreached = lanes.mirror(&tag, Mirror::Create).await;
        assert_eq!(unreached.into_iter().collect::<Vec<_>>(), vec![1]);
        b.failing.store(false, Ordering::Relaxed);
        let r = lanes.repair().await;
        assert_eq!(r.created, vec![(1, "orders".to_owned())]);
        assert_eq!(b.get_tag("orders").await.unwrap().unwrap().max_id, 5000);
        // Deleted on A while B is away.
        b.failing.store(true, Ordering::Relaxed);
        lanes.own().engine.delete_tag(&tag).await.unwrap();
        assert!(!lanes.mirror(&tag, Mirror::Delete).await.is_empty());
        b.failing.store(false, Ordering::Relaxed);
        let r = lanes.repair().await;
        assert_eq!(r.deleted, vec![(1, "orders".to_owned())]);
        assert!(b.get_tag("orders").await.unwrap().is_none());
        assert!(
            a.get_tag("orders").await.unwrap().is_none(),
            "the delete was undone"
        );
    }

    /// Issue 43: a tag deleted in region B while region A's database was cut off is not served
    /// by region A's server once the watch reaches B again: one pass, no repair interval.
    #[tokio::test]
    async fn a_delete_made_during_a_partition_stops_the_other_side_at_the_next_pass() {
        let a_db = Arc::new(MemoryStore::with_rows(&[("orders", 1, 100)]));
        let b_db = Arc::new(MemoryStore::with_rows(&[("orders", 1, 100)]));
        let region_a = Lanes::new(lane(&a_db, 0, true), vec![lane(&b_db, 1, false)]);
        let region_b = Lanes::new(lane(&b_db, 1, true), vec![lane(&a_db, 0, false)]);
        let settled = crate::segment::lanes::watch::Settled::default();
        assert!(region_a.watch_pass(&settled).await.0.is_empty());
        assert!(!region_a.next_ids("orders", 5).await.unwrap().is_empty());
        // The partition: B deletes on its own lane only (the mirror to A fails).
        let tag = BizTag::parse("orders").unwrap();
        region_b.own().engine.delete_tag(&tag).await.unwrap();
        // Region A still serves from its own lane: it cannot reach B, and its pass finds
        // nothing and settles nothing.
        b_db.failing.store(true, Ordering::Relaxed);
        let (deleted, next) = region_a.watch_pass(&settled).await;
        assert!(deleted.is_empty());
        assert_eq!(next, crate::segment::lanes::watch::WATCH_INTERVAL_APART);
        assert!(region_a.next_ids("orders", 5).await.is_ok());
        b_db.failing.store(false, Ordering::Relaxed);
        // The heal: A's next pass reads B's tombstone and deletes the tag on A's lane.
        let (deleted, _) = region_a.watch_pass(&settled).await;
        assert_eq!(deleted, vec![(0, "orders".to_owned())]);
        for _ in 0..3 {
            assert!(matches!(
                region_a.next_ids("orders", 5).await,
                Err(SegmentError::UnknownTag(_))
            ));
        }
        // Settled: the next pass repairs nothing again.
        assert!(region_a.watch_pass(&settled).await.0.is_empty());
        // A re-created name (above its high-water mark, on both lanes) is served again: a
        // settled tombstone does not delete it.
        let again = NewTag {
            biz_tag: "orders".into(),
            step: 100,
            max_id: 10_000,
            description: None,
        };
        a_db.create_tag(&again).await.unwrap();
        b_db.create_tag(&again).await.unwrap();
        assert!(region_a.watch_pass(&settled).await.0.is_empty());
        assert!(region_a.next_ids("orders", 5).await.is_ok());
    }

    /// A delete whose repair missed a lane (down) is carried there once that lane answers
    /// again, and not repaired on every pass meanwhile.
    #[tokio::test]
    async fn a_delete_that_missed_a_lane_is_carried_when_it_answers() {
        let a_db = Arc::new(MemoryStore::with_rows(&[("gone", 1, 100)]));
        let b_db = Arc::new(MemoryStore::with_rows(&[("gone", 1, 100)]));
        let region_a = Lanes::new(lane(&a_db, 0, true), vec![lane(&b_db, 1, false)]);
        let settled = crate::segment::lanes::watch::Settled::default();
        let tag = BizTag::parse("gone").unwrap();
        b_db.failing.store(true, Ordering::Relaxed);
        region_a.own().engine.delete_tag(&tag).await.unwrap();
        for _ in 0..3 {
            let (deleted, _) = region_a.watch_pass(&settled).await;
            assert!(deleted.is_empty());
        }
        b_db.failing.store(false, Ordering::Relaxed);
        let (deleted, _) = region_a.watch_pass(&settled).await;
        assert_eq!(deleted, vec![(1, "gone".to_owned())]);
        assert!(b_db.get_tag("gone").await.unwrap().is_none());
        assert!(region_a.watch_pass(&settled).await.0.is_empty());
    }
}
