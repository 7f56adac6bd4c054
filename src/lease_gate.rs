//! [`LeaseGate`]: whether an engine may take a lease from its database right now, and why not.
//!
//! Both engines hand out ids only under a lease the database confirmed (a segment, a worker id).
//! Some refusals are known before a lease is tried: a database whose settings can lose a
//! committed lease in a crash is refused by the durability gate (`crate::store::durability`),
//! and asking it anyway would only make a request wait for a lease that cannot come. The engine
//! asks its gate when it would need a lease, and answers that refusal as its own typed reason
//! (`SegmentError::LossyDatabase`, `SnowflakeError::LossyDatabase`); an adapter (HTTP, CLI)
//! only maps the reason to its answer. Engines own the rule; the gate is wired in by
//! `crate::startup` and knows nothing of either engine.

use std::sync::Arc;

/// Why no lease may be taken now, if it may not: a cheap check, called when an engine would
/// need a lease (never on the id path from memory).
#[derive(Clone, Default)]
pub struct LeaseGate(Option<Arc<dyn Fn() -> Option<String> + Send + Sync>>);

impl LeaseGate {
    /// A gate that never refuses (tests, and a database whose commits are durable).
    pub fn open() -> Self {
        Self(None)
    }

    /// A gate asking `refusal` each time: `Some(why)` refuses, naming the setting and its fix.
    pub fn new(refusal: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(refusal)))
    }

    /// Why no lease may be taken now; `None` when one may.
    pub fn refusal(&self) -> Option<String> {
        self.0.as_ref().and_then(|f| f())
    }
}

impl std::fmt::Debug for LeaseGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "LeaseGate(checked)"
        } else {
            "LeaseGate(open)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_gate_never_refuses_and_a_checked_one_asks_each_time() {
        assert_eq!(LeaseGate::open().refusal(), None);
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = flag.clone();
        let gate = LeaseGate::new(move || {
            f.load(std::sync::atomic::Ordering::Relaxed)
                .then(|| "innodb_flush_log_at_trx_commit = 0".to_owned())
        });
        assert_eq!(gate.refusal(), None);
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(gate.refusal().unwrap().contains("innodb"));
    }
}
