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
        bounded_about(segment, tag, segment.get_tag(tag)).await
    }

    /// The format of `tag` if this server knows it as formatted (for showing a row).
    pub fn known_format(&self, tag: &str) -> Option<TagFormat> {
        self.segment_engine()?.cached_spec(tag)?.format().cloned()
    }

    /// Creates a tag, plain or (with `format`) formatted, then mirrors it on the other lanes.
    pub async fn create_tag(
        &self,
        new: &NewTag,
        format: Option<&TagFormat>,
    ) -> Result<Mirrored<TagRow>, Error> {
        let tag = BizTag::parse(&new.biz_tag)?;
        let segment = self.segment()?;
        let row = match format {
            None => bounded_about(segment, &tag, segment.create_tag(new))
                .await
                .inspect_err(|e| {
                    if let Error::MaxIdBelowDeleted { high_water, .. } = e {
                        tracing::info!(biz_tag = %tag, max_id = new.max_id, high_water, "tag create refused: below its deleted high-water mark");
                    }
                })?,
            Some(shape) => self.create_formatted(segment, &tag, new, shape).await?,
        };
        tracing::info!(biz_tag = %tag, step = new.step, max_id = new.max_id, formatted = format.is_some(), "tag created");
        Ok(self.mirror(row, &tag, Mirror::Create).await)
    }

    /// A formatted tag: checked, then written format first
    /// ([`SegmentAllocator::create_formatted_tag`]).
    async fn create_formatted(
        &self,
        segment: &SegmentAllocator,
        tag: &BizTag,
        new: &NewTag,
        shape: &TagFormat,
    ) -> Result<TagRow, Error> {
        TagSpec::check_new(tag, shape).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        TagSpec::check_row(shape, new.step, Some(new.max_id))
            .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let row = tokio::time::timeout(
            segment.config().wait_timeout * 2,
            segment.create_formatted_tag(new, shape),
        )
        .await
        .map_err(|_| Error::DatabaseUnavailable)?
        .map_err(|e| match e {
            FormatConflict::Store(e) => Error::from_store(e, tag.as_str()),
            FormatConflict::Differs(stored) => Error::BizTagExists(format!(
                "{tag} (its name keeps the format it was first created with: {stored})"
            )),
            FormatConflict::Spec(why) => Error::InvalidRequest(why.to_string()),
        })?;
        // Known to this server at once (the others learn it at their next refresh or first
        // request).
        let _ = segment.spec_of(tag).await;
        Ok(row)
    }

    /// Changes a tag's step and/or description; `unknown_biz_tag` if it does not exist.
    pub async fn update_tag(
        &self,
        tag: &BizTag,
        change: &TagUpdate,
    ) -> Result<Mirrored<TagRow>, Error> {
        let segment = self.segment()?;
        if let Some(step) = change.step() {
            // A formatted tag's step is bounded by its width, as at creation.
            let spec = segment.spec_of(tag).await.map_err(Error::from)?;
            if let Some(format) = spec.as_deref().and_then(TagSpec::format) {
                TagSpec::check_row(format, step.get(), None)
                    .map_err(|e| Error::InvalidRequest(e.to_string()))?;
            }
        }
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
