//! Tag administration through the [`IdService`]: reads and writes on the own lane's engine
//! (which keeps its cache in step), each bounded by `segment.load_timeout_ms` as a whole, and
//! every write mirrored on the other lanes, with the lanes not reached in the answer. Whether a
//! caller may write is the transport's question to [`crate::access`] before it calls here (the
//! CLI, which holds the database's credentials, writes directly).

use std::collections::BTreeSet;

use crate::error::Error;
use crate::segment::lanes::repair::Mirror;
use crate::segment::{
    BizTag, FormatConflict, NewTag, SegmentAllocator, Step, StoreError, TagRow, TagSpec, TagUpdate,
};
use crate::shapes::TagFormat;

use super::IdService;

/// An admin write's result, with the lanes it has not reached yet (their slots, increasing;
/// empty without lanes). The repair pass settles those when they answer.
#[derive(Debug)]
pub struct Mirrored<T> {
    /// What the own lane answered.
    pub value: T,
    /// The other lanes not reached.
    pub unreached: Vec<u8>,
}

/// Runs an engine call of an admin write or read, bounded by `segment.load_timeout_ms` as a
/// whole: a call whose answer never comes is `database_unavailable`, not a request held
/// forever. (A write that timed out may still have committed: the next read shows it.)
async fn bounded<T>(
    segment: &SegmentAllocator,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let within = segment.config().load_timeout;
    tokio::time::timeout(within, call)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {within:?}"),
            ))))
        })
}

/// [`bounded`] for a call about `tag`: its 404 and 409 errors name the tag.
async fn bounded_about<T>(
    segment: &SegmentAllocator,
    tag: &BizTag,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, Error> {
    bounded(segment, call)
        .await
        .map_err(|e| Error::from_store(e, tag.as_str()))
}

impl IdService {
    /// Every row, ordered by tag.
    pub async fn list_tags(&self) -> Result<Vec<TagRow>, Error> {
        let segment = self.segment()?;
        Ok(bounded(segment, segment.list_tags()).await?)
    }

    /// One row, if present.
    pub async fn get_tag(&self, tag: &BizTag) -> Result<Option<TagRow>, Error> {
        let segment = self.segment()?;
        let row = bounded_about(segment, tag, segment.get_tag(tag)).await?;
        if row.is_some() {
            // Its format, for [`IdService::known_format`]: a tag created on another server (or
            // region) is not in this server's spec cache until read (and cached) here.
            let within = segment.config().load_timeout;
            let _ = tokio::time::timeout(within, segment.spec_of(tag)).await;
        }
        Ok(row)
    }

    /// The format of `tag` if this server knows it as formatted (for showing a row).
    pub fn known_format(&self, tag: &str) -> Option<TagFormat> {
        self.segment_engine()?.cached_spec(tag)?.format().cloned()
    }

    /// Creates a tag, plain or (with `format`) formatted, on the home lane (slot 0's with
    /// lanes), then mirrors it on the other lanes.
    ///
    /// One name, one kind and format, across regions (issue 43): with lanes, every create is
    /// decided by slot 0's database, the registry of names and formats, whose row's primary key
    /// and format row settle every race; the other lanes get the tag by the mirror (or the
    /// repair) with slot 0's format. A region that cannot reach slot 0's database (a partition)
    /// creates nothing: `database_unavailable`, and its existing tags are served on as before.
    /// So two regions never create one name with two formats (or one plain, one formatted)
    /// while apart; `lanes::a_name_is_created_once_across_regions` tries it.
    pub async fn create_tag(
        &self,
        new: &NewTag,
        format: Option<&TagFormat>,
    ) -> Result<Mirrored<TagRow>, Error> {
        let tag = BizTag::parse(&new.biz_tag)?;
        let route = self.segment_route()?;
        let segment = route.home();
        let row = match format {
            None => self.create_plain(segment, &tag, new).await,
            Some(shape) => self.create_formatted(segment, &tag, new, shape).await,
        }
        .inspect_err(|e| {
            if matches!(e, Error::DatabaseUnavailable) && !std::ptr::eq(segment, route.own()) {
                tracing::warn!(biz_tag = %tag, "tag create refused: tags are created on slot 0's database (the registry of names and formats), which does not answer");
            }
        })?;
        tracing::info!(biz_tag = %tag, step = new.step, max_id = new.max_id, formatted = format.is_some(), "tag created");
        Ok(self.mirror(row, &tag, Mirror::Create).await)
    }

    /// A plain tag. Refused (`biz_tag_exists`) when the name is taken, and also when a format
    /// is stored for it (a deleted formatted tag keeps its format for good): then the message
    /// names the kept format and the way out.
    async fn create_plain(
        &self,
        segment: &SegmentAllocator,
        tag: &BizTag,
        new: &NewTag,
    ) -> Result<TagRow, Error> {
        match bounded(segment, segment.create_tag(new)).await {
            Ok(row) => Ok(row),
            Err(StoreError::AlreadyExists) => {
                // Why it is taken, for the message only (the store decided, inside its insert).
                let kept = bounded(segment, segment.store().get_format(tag.as_str()))
                    .await
                    .ok()
                    .flatten();
                // A formatted tag that exists is simply taken; a deleted one keeps its format.
                let exists = || async {
                    bounded(segment, segment.get_tag(tag))
                        .await
                        .map_or(true, |row| row.is_some())
                };
                match kept {
                    Some(kept) if !exists().await => {
                        tracing::info!(biz_tag = %tag, "plain tag create refused: the name keeps its format");
                        Err(kept_format(tag, &kept))
                    }
                    _ => Err(Error::from_store(StoreError::AlreadyExists, tag.as_str())),
                }
            }
            Err(e) => {
                let e = Error::from_store(e, tag.as_str());
                if let Error::MaxIdBelowDeleted { high_water, .. } = &e {
                    tracing::info!(biz_tag = %tag, max_id = new.max_id, high_water, "tag create refused: below its deleted high-water mark");
                }
                Err(e)
            }
        }
    }

    /// A formatted tag: checked, then its format and row written in one transaction
    /// ([`SegmentAllocator::create_formatted_tag`]), bounded by `segment.load_timeout_ms` like
    /// every admin write (not by the segment wait: a create that waited on a racing one's locks
    /// must get its 409, not a 503 while the database is still answering).
    async fn create_formatted(
        &self,
        segment: &SegmentAllocator,
        tag: &BizTag,
        new: &NewTag,
        shape: &TagFormat,
    ) -> Result<TagRow, Error> {
        TagSpec::check_new(tag, shape).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        TagSpec::check_start(shape, new.max_id)
            .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let within = segment.config().load_timeout;
        tokio::time::timeout(within, segment.create_formatted_tag(new, shape))
            .await
            .map_err(|_| {
                tracing::warn!(biz_tag = %tag, timeout_ms = within.as_millis() as u64, "formatted tag create: no answer in time");
                Error::DatabaseUnavailable
            })?
            .map_err(|e| match e {
                FormatConflict::Store(e) => Error::from_store(e, tag.as_str()),
                FormatConflict::Differs(stored) => kept_format(tag, &stored),
                FormatConflict::Spec(why) => Error::InvalidRequest(why.to_string()),
            })
    }

    /// Creates a strict tag (`crate::segment::strict`): a plain row with the strict spec, in
    /// one transaction, kept for the name for good like a format. Refused with lanes (a strict
    /// order over several regions would need one owner over all of them).
    pub async fn create_strict_tag(&self, new: &NewTag) -> Result<Mirrored<TagRow>, Error> {
        let tag = BizTag::parse(&new.biz_tag)?;
        let route = self.segment_route()?;
        if route.lane_set().is_some() {
            return Err(Error::InvalidRequest(
                "strict tags are not served by servers with lanes: one owner over every \
                 region's database would make every region wait on it (docs/guarantees.md)"
                    .into(),
            ));
        }
        let segment = route.own();
        let within = segment.config().load_timeout;
        let row = tokio::time::timeout(within, segment.create_strict_tag(new))
            .await
            .map_err(|_| Error::DatabaseUnavailable)?
            .map_err(|e| match e {
                FormatConflict::Store(e) => Error::from_store(e, tag.as_str()),
                FormatConflict::Differs(stored) => kept_format(&tag, &stored),
                FormatConflict::Spec(why) => Error::InvalidRequest(why.to_string()),
            })?;
        tracing::info!(biz_tag = %tag, step = new.step, max_id = new.max_id, "strict tag created");
        Ok(Mirrored {
            value: row,
            unreached: Vec::new(),
        })
    }

    /// How `tag`'s ids are ordered, if this server knows its spec (for showing a row).
    pub fn known_order(&self, tag: &str) -> crate::segment::OrderMode {
        self.segment_engine()
            .and_then(|e| e.cached_spec(tag))
            .map_or(crate::segment::OrderMode::PerServer, |s| s.ordering())
    }

    /// Changes a tag's step and/or description; `unknown_biz_tag` if it does not exist.
    pub async fn update_tag(
        &self,
        tag: &BizTag,
        change: &TagUpdate,
    ) -> Result<Mirrored<TagRow>, Error> {
        let segment = self.segment()?;
        let Some(row) = bounded_about(segment, tag, segment.update_tag(tag, change)).await? else {
            return Err(Error::unknown_tag(tag));
        };
        let step = change.step().map(Step::get);
        tracing::info!(biz_tag = %tag, ?step, "tag updated; a new step applies from the next segment load");
        let op = Mirror::Update {
            step,
            description: change.description(),
        };
        Ok(self.mirror(row, tag, op).await)
    }

    /// Deletes a tag (its buffer is dropped, its `max_id` kept as its high-water mark);
    /// `unknown_biz_tag` if it does not exist.
    pub async fn delete_tag(&self, tag: &BizTag) -> Result<Mirrored<()>, Error> {
        let segment = self.segment()?;
        // The engine drops the buffer too, also under the stored spelling (MySQL's `Orders`
        // deletes the row `orders`).
        if !bounded_about(segment, tag, segment.delete_tag(tag)).await? {
            return Err(Error::unknown_tag(tag));
        }
        // A strict tag's owner row goes too, so its owner stops serving what it holds (any
        // tag: this server may never have read the tag's spec; a plain tag has no row).
        if let Some(s) = &self.strict {
            s.forget(tag.as_str()).await;
        }
        tracing::info!(biz_tag = %tag, "tag deleted");
        Ok(self.mirror((), tag, Mirror::Delete).await)
    }

    /// Mirrors a write done on the own lane on the other lanes, bounded by the load timeout;
    /// `value` with the lanes not reached (the repair settles them when they answer).
    async fn mirror<T>(&self, value: T, tag: &BizTag, op: Mirror<'_>) -> Mirrored<T> {
        let route = self.segment.as_ref();
        let (Some(lanes), Some(route)) = (route.and_then(|r| r.lane_set()), route) else {
            return Mirrored {
                value,
                unreached: Vec::new(),
            };
        };
        let within = route.own().config().load_timeout;
        let unreached: BTreeSet<u8> = tokio::time::timeout(within, lanes.mirror(tag, op))
            .await
            .unwrap_or_else(|_| lanes.others().iter().map(|l| l.slot).collect());
        if !unreached.is_empty() {
            tracing::warn!(biz_tag = %tag, ?unreached, "admin write not mirrored on every lane yet: the repair settles it");
        }
        Mirrored {
            value,
            unreached: unreached.into_iter().collect(),
        }
    }
}

/// The 409 for a create of a name that keeps another format (`stored`, its JSON) for good:
/// the format as a pattern ([`describe_stored`]) and the way out.
fn kept_format(tag: &BizTag, stored: &str) -> Error {
    Error::BizTagExists(format!(
        "{tag} (the name keeps the format it was first created with, {}: create it again \
         with that format, or choose another name)",
        describe_stored(stored)
    ))
}

/// A stored format as people read it in a message: its pattern (`prefix`, date part, one `#`
/// per sequence character, `C` for a check character, `suffix`), then its alphabet, reset and
/// zone, e.g. `INV-yyyy-###### (decimal, reset yearly, zone UTC)`. No JSON, so nothing is
/// escaped inside the quotes of the error's tag. JSON that does not read as a format (never
/// written by this server) is shown as "an unreadable format".
pub(crate) fn describe_stored(json: &str) -> String {
    if crate::segment::is_strict_spec(json) {
        return "strict order (numbers, increasing across every server)".to_owned();
    }
    let Ok(f) = TagSpec::stored_format(json) else {
        return "an unreadable format".to_owned();
    };
    let name = |v: serde_json::Result<serde_json::Value>| {
        v.ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let mut pattern = f.prefix.clone();
    pattern.push_str(f.date.as_deref().unwrap_or(""));
    pattern.extend(std::iter::repeat_n('#', usize::from(f.width)));
    if f.check {
        pattern.push('C');
    }
    pattern.push_str(&f.suffix);
    let mut extra = vec![
        name(serde_json::to_value(f.radix)),
        format!("reset {}", name(serde_json::to_value(f.reset))),
        format!("zone {}", f.time_zone),
    ];
    if f.permute.is_some() {
        extra.push("permuted".to_owned());
    }
    if f.gaps.is_some() {
        extra.push("gapped".to_owned());
    }
    format!("{pattern} ({})", extra.join(", "))
}

#[cfg(test)]
mod tests {
    use super::describe_stored;

    /// Issue 42, item 9: the kept format is shown as a pattern, with no JSON (no quotes to
    /// escape inside the error's quoted tag).
    #[test]
    fn a_kept_format_reads_as_a_pattern_not_json() {
        let json = r#"{"prefix":"INV-","date":"yyyy-","width":6,"check":true,"reset":"yearly","time_zone":"Europe/Paris"}"#;
        let shown = describe_stored(json);
        assert_eq!(
            shown,
            "INV-yyyy-######C (decimal, reset yearly, zone Europe/Paris)"
        );
        assert!(!shown.contains('"') && !shown.contains('{'), "{shown}");
        assert_eq!(describe_stored("{not json"), "an unreadable format");
    }
}
