//! [`IdService`]: the one id service every transport calls (HTTP today, the CLI, a gRPC door
//! next). It owns every decision about *which* engine serves a request:
//!
//! - a plain tag's ids from the own lane, or the next lane that can ([`SegmentRoute`]);
//! - a formatted tag's texts from the lane of slot 0 (their sequence has no room for a slot),
//!   and its decode from the same lane, so a decode reads the format the ids came from;
//! - who may decode a permuted tag ([`crate::access`]);
//! - tag writes mirrored on the other lanes, with the lanes not reached;
//! - snowflake ids, decode and bounds.
//!
//! It answers [`Error`], the transport-free failure; a transport only parses its own wire form
//! and writes the answer.
//!
//! - [`segment`]: segment and formatted ids, runs, decode.
//! - [`tags`]: tag administration, mirrored across lanes.
//! - [`tokens`]: caller tokens: create, list, revoke (the server's own database).
//! - [`snowflake`]: snowflake ids, decode and bounds.
//! - [`strict`]: strict tags, served by their owner and forwarded to it by the others.
//! - [`offload`]: CPU-bound work (a permuted batch's FF1) off the request threads.

pub mod offload;
pub mod quota;
pub mod segment;
pub mod snowflake;
pub mod strict;
pub mod tags;
pub mod tokens;

use std::sync::Arc;

use crate::access::AccessPolicy;
use crate::error::Error;
use crate::segment::SegmentAllocator;
use crate::segment::lanes::{LaneClaims, Lanes};
use crate::snowflake::engine::SnowflakeEngine;

pub use segment::{Admitted, Ids, MAX_COUNT, MAX_RANGE_COUNT};
pub use tags::Mirrored;

/// Where a server's segment requests go: its own engine, and with lanes
/// (`crate::segment::lanes`) the others after it.
#[derive(Clone)]
pub struct SegmentRoute {
    /// The own lane's engine (the only one without lanes).
    own: SegmentAllocator,
    /// The lanes, own first, when `lanes.slot` is set; `lanes.own().engine` is `own`.
    lanes: Option<Arc<Lanes>>,
    /// The lane databases' claims: a refused own lane refuses every segment request.
    claims: Option<Arc<LaneClaims>>,
}

impl SegmentRoute {
    /// A server without lanes: every request to `engine`.
    pub fn single(engine: SegmentAllocator) -> Self {
        Self {
            own: engine,
            lanes: None,
            claims: None,
        }
    }

    /// This route, whose stores joined `claims` (`crate::segment::lanes::claims`).
    pub fn with_claims(mut self, claims: Arc<LaneClaims>) -> Self {
        self.claims = Some(claims);
        self
    }

    /// The lane databases' claims, when the route's stores joined them.
    pub fn claims(&self) -> Option<&Arc<LaneClaims>> {
        self.claims.as_ref()
    }

    /// Whether the own lane is refused: one relaxed load, for the id routes' fast path.
    #[inline]
    pub fn is_refused(&self) -> bool {
        self.claims().is_some_and(|c| c.is_refused())
    }

    /// Why the own lane is refused (`lane_mismatch`), `None` while it serves.
    pub fn refused(&self) -> Option<String> {
        self.claims().and_then(|c| c.refused_because())
    }

    /// A server with lanes: the own lane's engine first, the others after it; the lanes'
    /// claims, if they joined any, are the route's.
    pub fn lanes(lanes: Arc<Lanes>) -> Self {
        Self {
            own: lanes.own().engine.clone(),
            claims: lanes.claims().cloned(),
            lanes: Some(lanes),
        }
    }

    /// The own lane's engine.
    pub fn own(&self) -> &SegmentAllocator {
        &self.own
    }

    /// The lanes, when configured.
    pub fn lane_set(&self) -> Option<&Arc<Lanes>> {
        self.lanes.as_ref()
    }

    /// The home engine: slot 0's with lanes, else the only one. Every tag is created there
    /// first (slot 0's database is the registry of names and formats, so a partition never
    /// lets two regions create one name two ways), and a formatted tag leases from it and is
    /// decoded by it. With lanes but no slot 0 configured, the own engine (its formatted tags
    /// then fail to lease, as before, and names are not fenced across regions).
    pub fn home(&self) -> &SegmentAllocator {
        self.lanes
            .as_ref()
            .and_then(|l| l.slot_zero())
            .map_or(&self.own, |l| &l.engine)
    }
}

/// The id service: the engines this server runs, and who may ask.
#[derive(Clone)]
pub struct IdService {
    segment: Option<SegmentRoute>,
    snowflake: Option<Arc<SnowflakeEngine>>,
    access: AccessPolicy,
    /// The callers' quotas (`quota`): `None` charges nothing (the CLI, tests).
    quotas: Option<Arc<quota::Quotas>>,
    /// Strict tags (`strict`): `None` serves none (`invalid_request`).
    strict: Option<Arc<strict::StrictService>>,
}

impl IdService {
    /// A service over the engines enabled (`None`: that engine's requests answer
    /// `engine_disabled`), admitting callers by `access`.
    pub fn new(
        segment: Option<SegmentRoute>,
        snowflake: Option<Arc<SnowflakeEngine>>,
        access: AccessPolicy,
    ) -> Self {
        Self {
            segment,
            snowflake,
            access,
            quotas: None,
            strict: None,
        }
    }

    /// This service, serving strict tags through `strict`.
    pub fn with_strict(mut self, strict: Arc<strict::StrictService>) -> Self {
        self.strict = Some(strict);
        self
    }

    /// The strict tags' service, if this server serves them.
    pub fn strict(&self) -> Option<&Arc<strict::StrictService>> {
        self.strict.as_ref()
    }

    /// This service, charging callers with limits to `quotas`.
    pub fn with_quotas(mut self, quotas: Arc<quota::Quotas>) -> Self {
        self.quotas = Some(quotas);
        self
    }

    /// Who may do what.
    pub fn access(&self) -> &AccessPolicy {
        &self.access
    }

    /// The segment route, or `engine_disabled`.
    pub fn segment_route(&self) -> Result<&SegmentRoute, Error> {
        self.segment
            .as_ref()
            .ok_or(Error::EngineDisabled("segment"))
    }

    /// The own lane's segment engine (monitor pages, metrics, readiness), or `engine_disabled`.
    pub fn segment(&self) -> Result<&SegmentAllocator, Error> {
        self.segment_route().map(SegmentRoute::own)
    }

    /// The own segment engine if enabled.
    pub fn segment_engine(&self) -> Option<&SegmentAllocator> {
        self.segment.as_ref().map(SegmentRoute::own)
    }

    /// The snowflake engine, or `engine_disabled`.
    pub fn snowflake(&self) -> Result<&Arc<SnowflakeEngine>, Error> {
        self.snowflake
            .as_ref()
            .ok_or(Error::EngineDisabled("snowflake"))
    }

    /// The snowflake engine if enabled.
    pub fn snowflake_engine(&self) -> Option<&Arc<SnowflakeEngine>> {
        self.snowflake.as_ref()
    }

    /// Each lane with what it served and passed on, own first; empty without lanes.
    pub fn lane_reports(&self) -> Vec<LaneReport> {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(lanes) = self.segment.as_ref().and_then(|s| s.lanes.as_ref()) else {
            return Vec::new();
        };
        lanes
            .in_order()
            .map(|l| LaneReport {
                slot: l.slot,
                name: l.name.clone(),
                // Relaxed: counters for people, nothing is published with them.
                served: l.served.load(Relaxed),
                passed: l.passed.load(Relaxed),
            })
            .collect()
    }
}

/// One lane as `GET /api/v1/lanes` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneReport {
    /// Its slot.
    pub slot: u8,
    /// Its database, password hidden.
    pub name: String,
    /// Requests it served.
    pub served: u64,
    /// Requests it passed to the next lane.
    pub passed: u64,
}
