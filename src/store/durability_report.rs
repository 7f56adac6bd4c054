//! What a durability check reports: each database setting that can lose a committed lease in a
//! crash ([`LossySetting`]), and one check's findings ([`DurabilityReport`]) with the refusal a
//! lease gets for them. Each database's folder reads its own settings into these
//! (`mysql/durability.rs`, `postgres/durability.rs`, `sqlite/durability.rs`); the gate in
//! [`durability`](super::durability) acts on them.

/// The configuration key that accepts a lossy database.
pub const OVERRIDE: &str = "database.allow_lossy_commits = true";

/// One setting that can lose a committed lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossySetting {
    /// The setting's name as the database spells it (`innodb_flush_log_at_trx_commit`).
    pub name: &'static str,
    /// Its value as the database reported it.
    pub value: String,
    /// What a crash does with it.
    pub why: &'static str,
    /// What to set instead.
    pub fix: &'static str,
}

/// What one check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurabilityReport {
    /// `mysql`, `sqlite` or `postgres` (as [`Database::kind`](crate::store::Database::kind)).
    pub database: &'static str,
    /// Every setting that can lose a commit; empty when commits are durable.
    pub lossy: Vec<LossySetting>,
}

impl DurabilityReport {
    /// Whether no setting can lose a commit.
    pub fn is_durable(&self) -> bool {
        self.lossy.is_empty()
    }

    /// `name = value, name = value`.
    pub fn settings(&self) -> String {
        self.lossy
            .iter()
            .map(|s| format!("{} = {}", s.name, s.value))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The refusal a lease gets: every setting with its value and fix, and the override.
    pub fn refusal(&self) -> String {
        let each: Vec<String> = self
            .lossy
            .iter()
            .map(|s| format!("{} = {} ({}; set {})", s.name, s.value, s.why, s.fix))
            .collect();
        format!(
            "the {} database can lose committed leases in a crash, and ids would then be handed \
             out twice: {}. Fix the setting, or accept the risk with {OVERRIDE}",
            self.database,
            each.join("; ")
        )
    }
}

/// `name=value` for each setting, for the tests' assertions.
#[cfg(test)]
pub(crate) fn names(lossy: &[LossySetting]) -> Vec<String> {
    lossy
        .iter()
        .map(|s| format!("{}={}", s.name, s.value))
        .collect()
}
