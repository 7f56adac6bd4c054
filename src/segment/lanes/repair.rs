//! Tags across lanes: every lane holds every tag. An admin write goes to the own lane, then to
//! every other lane it can reach ([`Lanes::mirror`], which names the lanes it could not reach),
//! and a repair pass ([`Lanes::repair`], each refresh interval) settles what a partition left
//! behind:
//!
//! - a tag on some lanes and missing on another that holds **no tombstone** for it is created
//!   there, at the highest `max_id` of the others (so its ids lie above everything the tag
//!   issued before lanes), with the same step, description and format;
//! - a tag missing on a lane that **holds its tombstone** was deleted there: it is deleted on
//!   the others too. A deletion is never undone by a repair; a tag created during a partition
//!   under a name deleted earlier on an unreachable lane is deleted again when that lane
//!   returns (create it again once every lane answers).
//!
//! A formatted tag's period rows (`tag@period`) live on slot 0 only and are not repaired.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::router::Lanes;
use crate::segment::{BizTag, FormattedCreate, NewTag, SegmentStore, StoreError, TagRow};

/// An admin write to mirror on the other lanes.
#[derive(Debug, Clone, Copy)]
pub enum Mirror<'a> {
    /// The tag was created on the own lane.
    Create,
    /// The tag's step and/or description changed.
    Update {
        /// The new step.
        step: Option<i64>,
        /// The new description.
        description: Option<&'a str>,
    },
    /// The tag was deleted.
    Delete,
}

/// What a repair pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// Tags created on a lane that lacked them: (slot, tag).
    pub created: Vec<(u8, String)>,
    /// Tags deleted because a lane held their tombstone: (slot, tag).
    pub deleted: Vec<(u8, String)>,
    /// Lanes that could not be read or written.
    pub unreached: BTreeSet<u8>,
}

impl Lanes {
    fn stores(&self) -> impl Iterator<Item = (u8, &Arc<dyn SegmentStore>)> {
        self.in_order().map(|l| (l.slot, l.engine.store()))
    }

    /// Mirrors an admin write done on the own lane to every other lane; the slots it could
    /// not reach (the repair settles them when they answer).
    pub async fn mirror(&self, tag: &BizTag, op: Mirror<'_>) -> BTreeSet<u8> {
        let mut unreached = BTreeSet::new();
        match op {
            Mirror::Create => {
                let r = self.repair_tags(Some(tag.as_str())).await;
                unreached = r.unreached;
            }
            Mirror::Update { step, description } => {
                for lane in self.others() {
                    if lane
                        .engine
                        .store()
                        .update_tag(tag.as_str(), step, description)
                        .await
                        .is_err()
                    {
                        unreached.insert(lane.slot);
                    }
                }
            }
            Mirror::Delete => {
                for lane in self.others() {
                    if lane.engine.delete_tag(tag).await.is_err() {
                        unreached.insert(lane.slot);
                    }
                }
            }
        }
        unreached
    }

    /// One repair pass over every tag (see the module docs).
    pub async fn repair(&self) -> Repaired {
        self.repair_tags(None).await
    }

    /// A repair pass over `only` that one tag, or every tag.
    pub(super) async fn repair_tags(&self, only: Option<&str>) -> Repaired {
        let mut out = Repaired::default();
        // slot -> its rows by tag, for the lanes that answered.
        let mut rows: BTreeMap<u8, BTreeMap<String, TagRow>> = BTreeMap::new();
        for (slot, store) in self.stores() {
            let listed = match only {
                Some(tag) => store.get_tag(tag).await.map(|r| r.into_iter().collect()),
                None => store.list_tags().await,
            };
            match listed {
                Ok(list) => {
                    let by_tag = list
                        .into_iter()
                        .filter(|r| !crate::segment::PeriodRow::is_period_row(&r.biz_tag))
                        .map(|r| (r.biz_tag.clone(), r))
                        .collect();
                    rows.insert(slot, by_tag);
                }
                Err(_) => {
                    out.unreached.insert(slot);
                }
            }
        }
        let names: BTreeSet<String> = rows.values().flat_map(|m| m.keys().cloned()).collect();
        for name in names {
            if let Err(slot) = self.repair_one(&name, &rows, &mut out).await {
                out.unreached.insert(slot);
            }
        }
        out
    }

    async fn repair_one(
        &self,
        name: &str,
        rows: &BTreeMap<u8, BTreeMap<String, TagRow>>,
        out: &mut Repaired,
    ) -> Result<(), u8> {
        let holders: Vec<(u8, &TagRow)> = rows
            .iter()
            .filter_map(|(slot, m)| m.get(name).map(|r| (*slot, r)))
            .collect();
        let missing: Vec<u8> = rows
            .iter()
            .filter(|(_, m)| !m.contains_key(name))
            .map(|(slot, _)| *slot)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let store_of = |slot: u8| {
            self.stores()
                .find(|(s, _)| *s == slot)
                .map(|(_, st)| st.clone())
        };
        // A tombstone on a lane that lacks the tag: deleted there, so deleted everywhere.
        for &slot in &missing {
            let Some(store) = store_of(slot) else {
                continue;
            };
            if store.tombstone(name).await.map_err(|_| slot)?.is_some() {
                for &(holder, _) in &holders {
                    let lane = self.in_order().find(|l| l.slot == holder);
                    let Some(lane) = lane else { continue };
                    let Ok(tag) = BizTag::parse(name) else {
                        continue;
                    };
                    match lane.engine.delete_tag(&tag).await {
                        Ok(_) => {
                            tracing::warn!(
                                biz_tag = name,
                                slot = holder,
                                tombstone_on = slot,
                                "lanes: tag deleted on a lane that still had it (tombstone wins)"
                            );
                            out.deleted.push((holder, name.to_owned()));
                        }
                        Err(_) => return Err(holder),
                    }
                }
                return Ok(());
            }
        }
        // Missing with no tombstone: created at the highest max_id, a formatted one with its format
        // in the same transaction: slot 0's format when slot 0 holds the tag (slot 0's database
        // is the registry of names and formats, see `IdService::create_tag`), else the source's.
        let Some(&(source, model)) = holders.iter().max_by_key(|(_, r)| r.max_id) else {
            return Ok(());
        };
        let format_from = if holders.iter().any(|(slot, _)| *slot == 0) {
            0
        } else {
            source
        };
        let format = match store_of(format_from) {
            Some(st) => st.get_format(name).await.map_err(|_| format_from)?,
            None => None,
        };
        for slot in missing {
            let Some(store) = store_of(slot) else {
                continue;
            };
            let new = NewTag {
                biz_tag: name.to_owned(),
                step: model.step,
                max_id: model.max_id,
                description: model.description.clone(),
            };
            // A formatted tag's format and row in one transaction (a plain create of a name
            // whose format is stored is refused).
            let created = match &format {
                Some(f) => match store.create_formatted_tag(&new, f).await {
                    Ok(FormattedCreate::Created(row)) => Ok(row),
                    Ok(FormattedCreate::OtherFormat(_)) => {
                        // The lanes disagree on the name's format: not created here (each
                        // format is kept for good), and said so.
                        tracing::warn!(
                            biz_tag = name,
                            slot,
                            "lanes: tag not created on a lane that keeps another format for it"
                        );
                        continue;
                    }
                    Err(e) => Err(e),
                },
                None => store.create_tag(&new).await,
            };
            match created {
                Ok(_) | Err(StoreError::AlreadyExists) => {
                    tracing::info!(
                        biz_tag = name,
                        slot,
                        max_id = model.max_id,
                        "lanes: tag created on a lane that lacked it"
                    );
                    out.created.push((slot, name.to_owned()));
                }
                Err(_) => return Err(slot),
            }
        }
        Ok(())
    }
}
