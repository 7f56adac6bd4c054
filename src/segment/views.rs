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

use std::collections::BTreeMap;

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
        self.ids_issued += s.ids_issued;
        self.loads += s.loads;
        self.load_failures_total += s.load_failures_total;
        self.regressions_total += s.regressions_total;
        self.load_latency.merge(&s.load_latency);
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
        by_tag.into_values().collect()
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
