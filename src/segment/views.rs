//! What the monitor routes and the metrics show of the engine's tags: one view per tag, never
//! one per period (issue 42).
//!
//! A formatted tag serves from one `leaf_alloc` row per period ([`PeriodRow`]); a view folds
//! them into the tag: its counters summed over the period buffers this server holds, its gauges
//! (step, ids in memory, next segment ready) those of the current period only. So what a view
//! lists grows with the number of tags, never with the number of days served.
//!
//! [`SegmentAllocator::hides_volume`] is the one rule of whose counts are secret: a permuted
//! tag's (and its period rows'), whose ids are meant to show neither order nor volume. Who may
//! read them anyway is the access policy's (`crate::access::Action::ReadVolume`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use jiff::Timestamp;

use super::SegmentAllocator;
use super::buffer::BufferSnapshot;
use super::load_stats::LoadLatency;
use super::spec::PeriodRow;

/// One tag as the monitor routes and metrics see it: a plain tag's buffer, or a formatted
/// tag's period buffers folded into one.
#[derive(Debug, Clone)]
pub struct TagActivity {
    /// The tag (a formatted tag's own name, never a period row's).
    pub biz_tag: String,
    /// Whether its counts are secret ([`SegmentAllocator::hides_volume`] of the tag or of any
    /// of its period rows).
    pub volume_secret: bool,
    /// A plain tag's buffer; a formatted tag's current period's buffer, if this server holds
    /// it. The gauges come from here.
    pub current: Option<BufferSnapshot>,
    /// A formatted tag's current period key, by this server's clock (`None` for a plain tag).
    pub period: Option<String>,
    /// A formatted tag's share of the current period's width leased, 0 to 1.
    pub used: Option<f64>,
    /// Ids taken, summed over the tag's buffers (every period held here).
    pub ids_issued: u64,
    /// Successful loads, summed the same way.
    pub loads: u64,
    /// Failed loads, summed the same way.
    pub load_failures_total: u64,
    /// Regressions refused or trimmed, summed the same way.
    pub regressions_total: u64,
    /// Lease latencies, merged the same way.
    pub load_latency: LoadLatency,
}

impl TagActivity {
    fn new(biz_tag: String, volume_secret: bool) -> Self {
        Self {
            biz_tag,
            volume_secret,
            current: None,
            period: None,
            used: None,
            ids_issued: 0,
            loads: 0,
            load_failures_total: 0,
            regressions_total: 0,
            load_latency: LoadLatency::default(),
        }
    }

    fn add(&mut self, s: &BufferSnapshot) {
        self.add_counts(&Counts::of(s));
    }

    fn add_counts(&mut self, c: &Counts) {
        self.ids_issued += c.ids_issued;
        self.loads += c.loads;
        self.load_failures_total += c.load_failures_total;
        self.regressions_total += c.regressions_total;
        self.load_latency.merge(&c.load_latency);
    }
}

/// A buffer's counters (what a view sums).
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    ids_issued: u64,
    loads: u64,
    load_failures_total: u64,
    regressions_total: u64,
    load_latency: LoadLatency,
}

impl Counts {
    fn of(s: &BufferSnapshot) -> Self {
        Self {
            ids_issued: s.ids_issued,
            loads: s.loads,
            load_failures_total: s.load_failures_total,
            regressions_total: s.regressions_total,
            load_latency: s.load_latency.clone(),
        }
    }
}

/// The summed counters of a formatted tag's ended periods, whose buffers the engine dropped:
/// one entry per formatted tag (bounded by tags, never by days), so the tag's counters in the
/// views and metrics never go down when a period's buffer goes. A std Mutex: taken when a
/// period's buffer is dropped (once per period) and when a view is made, never on the id path.
#[derive(Debug, Default)]
pub(crate) struct EndedPeriods(Mutex<HashMap<Box<str>, Counts>>);

impl EndedPeriods {
    /// Adds the counters of the dropped buffer `s` of a period of `tag`.
    pub(crate) fn record(&self, tag: &str, s: &BufferSnapshot) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let c = all.entry(tag.into()).or_default();
        let add = Counts::of(s);
        c.ids_issued += add.ids_issued;
        c.loads += add.loads;
        c.load_failures_total += add.load_failures_total;
        c.regressions_total += add.regressions_total;
        c.load_latency.merge(&add.load_latency);
    }

    /// The summed counters of `tag`'s ended periods, if any were dropped.
    fn of(&self, tag: &str) -> Option<Counts> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.get(tag).cloned()
    }
}

impl SegmentAllocator {
    /// Whether the counts of the row or tag `name` are secret: `name` is a permuted tag or one
    /// of its period rows. Fails closed: a period row whose tag's spec this server does not
    /// know (yet) is secret too, as it may be permuted.
    pub fn hides_volume(&self, name: &str) -> bool {
        let parent = PeriodRow::parent_of(name);
        match self.cached_spec(parent.unwrap_or(name)) {
            Some(spec) => spec.format().is_some_and(|f| f.permute.is_some()),
            None => parent.is_some(),
        }
    }

    /// One view per tag this server holds, ordered by tag: plain tags with a buffer and every
    /// formatted tag it knows ([`TagActivity`]).
    pub fn activity(&self) -> Vec<TagActivity> {
        let now = Timestamp::now();
        let mut by_tag: BTreeMap<String, TagActivity> = BTreeMap::new();
        // Formatted tags first: each with its current period (the key and row by `now`).
        let mut current_rows: BTreeMap<String, String> = BTreeMap::new();
        for fill in self.period_fills() {
            let mut a = TagActivity::new(fill.biz_tag.clone(), self.hides_volume(&fill.biz_tag));
            if let Some(spec) = self.cached_spec(&fill.biz_tag)
                && let Ok(period) = spec.period_at(now)
            {
                current_rows.insert(
                    spec.period_row(&period.key).as_str().to_owned(),
                    fill.biz_tag.clone(),
                );
            }
            a.period = Some(fill.period);
            a.used = Some(fill.used);
            by_tag.insert(fill.biz_tag, a);
        }
        for s in self.snapshots() {
            let tag = PeriodRow::parent_of(&s.biz_tag).unwrap_or(&s.biz_tag);
            let a = by_tag
                .entry(tag.to_owned())
                .or_insert_with(|| TagActivity::new(tag.to_owned(), self.hides_volume(tag)));
            // Secret if the tag is, or if any of its rows is (a period row of a tag whose spec
            // this server does not know: fail closed).
            a.volume_secret |= self.hides_volume(&s.biz_tag);
            a.add(&s);
            // A plain tag's buffer is its own; a period's is shown only while it is current:
            // an ended period adds to the sums and nothing else.
            let is_current = if PeriodRow::is_period_row(&s.biz_tag) {
                current_rows.contains_key(&s.biz_tag)
            } else {
                true
            };
            if is_current {
                a.current = Some(s);
            }
        }
        for a in by_tag.values_mut() {
            if let Some(c) = self.ended_periods().of(&a.biz_tag) {
                a.add_counts(&c);
            }
        }
        by_tag.into_values().collect()
    }

    /// Records the counters of the buffer of an ended period of `tag` before it is dropped.
    pub(crate) fn record_ended(&self, tag: &str, s: &BufferSnapshot) {
        self.ended_periods().record(tag, s);
    }

    /// The buffer snapshot of each plain tag and of each formatted tag's current period (row
    /// `tag@period`), ordered by row name: the buffers of ended periods are left out.
    pub fn current_snapshots(&self) -> Vec<BufferSnapshot> {
        let mut out: Vec<BufferSnapshot> = self
            .activity()
            .into_iter()
            .filter_map(|a| a.current)
            .collect();
        out.sort_by(|a, b| a.biz_tag.cmp(&b.biz_tag));
        out
    }
}

#[cfg(test)]
mod tests;
