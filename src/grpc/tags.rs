//! `leafid.v1.Tags`: the tags read (as `GET /api/v1/tags`, with the monitor pages' credential)
//! and created (with the admin credential), through the [`IdService`](crate::service::IdService) and the same access
//! policy as `crate::http::tags`.

use tonic::{Request, Response, Status};

use super::caller::{CallCredentials, deadline};
use super::door::Door;
use super::pb;
use crate::access::Action;
use crate::error::Error;
use crate::segment::{BizTag, NewTag, PeriodRow, Step, TagRow};

/// The `Tags` service.
#[derive(Clone)]
pub struct Tags {
    door: Door,
}

impl Tags {
    /// The service over `door`.
    pub fn new(door: Door) -> Self {
        Self { door }
    }

    /// A row as the message shows it to a caller that may (`volume`) or may not read a
    /// permuted tag's volume: withheld, `max_id` is 0 and `volume_hidden` true.
    fn view(&self, row: TagRow, volume: bool) -> pb::Tag {
        let hidden = !volume
            && self
                .door
                .ids()
                .segment_engine()
                .is_some_and(|s| s.hides_volume(&row.biz_tag));
        pb::Tag {
            max_id: if hidden { 0 } else { row.max_id },
            step: row.step,
            description: row.description.unwrap_or_default(),
            update_time: row.update_time.map(|t| t.to_rfc3339()).unwrap_or_default(),
            volume_hidden: hidden,
            biz_tag: row.biz_tag,
        }
    }

    /// The monitor credential (else the refusal), and whether it also reads volumes.
    fn monitor(&self, who: &CallCredentials) -> Result<bool, Status> {
        let access = self.door.ids().access();
        access.admit(who, Action::MonitorRead)?;
        Ok(access.admit(who, Action::ReadVolume).is_ok())
    }
}

#[tonic::async_trait]
impl pb::tags_server::Tags for Tags {
    async fn list_tags(
        &self,
        req: Request<pb::ListTagsRequest>,
    ) -> Result<Response<pb::ListTagsReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let volume = self.monitor(&who)?;
        let mut rows = self
            .door
            .run(limit, |s| async move { s.list_tags().await })
            .await?;
        rows.retain(|r| !PeriodRow::is_period_row(&r.biz_tag));
        rows.sort_unstable_by(|a, b| a.biz_tag.cmp(&b.biz_tag));
        Ok(Response::new(pb::ListTagsReply {
            tags: rows.into_iter().map(|r| self.view(r, volume)).collect(),
        }))
    }

    async fn get_tag(&self, req: Request<pb::GetTagRequest>) -> Result<Response<pb::Tag>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let volume = self.monitor(&who)?;
        let tag = BizTag::parse(&req.into_inner().biz_tag).map_err(Error::from)?;
        let shown = tag.clone();
        let row = self
            .door
            .run(limit, move |s| async move { s.get_tag(&tag).await })
            .await?;
        match row {
            Some(row) => Ok(Response::new(self.view(row, volume))),
            None => Err(Error::unknown_tag(&shown).into()),
        }
    }

    async fn create_tag(
        &self,
        req: Request<pb::CreateTagRequest>,
    ) -> Result<Response<pb::Tag>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        // The admin credential before anything of the message is read.
        self.door.ids().access().admit(&who, Action::AdminWrite)?;
        let m = req.into_inner();
        let tag = BizTag::parse(&m.biz_tag).map_err(Error::from)?;
        let step = Step::try_from(m.step).map_err(Error::from)?;
        // 0 is proto3's "absent": the default start; any other value is checked by `NewTag`.
        let max_id = (m.max_id != 0).then_some(m.max_id);
        let description = (!m.description.is_empty()).then_some(m.description);
        let new = NewTag::new(tag, step, max_id, description).map_err(Error::from)?;
        let strict = m.strict;
        let done = self
            .door
            .run(limit, move |s| async move {
                if strict {
                    s.create_strict_tag(&new).await
                } else {
                    s.create_tag(&new, None).await
                }
            })
            .await?;
        Ok(Response::new(self.view(done.value, true)))
    }
}
