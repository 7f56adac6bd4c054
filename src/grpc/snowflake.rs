//! `leafid.v1.Snowflake`: snowflake ids, as a list and as runs, an id's fields and the id
//! bounds of a time range, through the [`IdService`](crate::service::IdService) (as `crate::http::snowflake`).

use tonic::{Request, Response, Status};

use super::caller::{CallCredentials, deadline};
use super::door::Door;
use super::pb;
use crate::error::Error;
use crate::http::decode::decode_body;
use crate::segment::{IdRuns, IdSink};

/// The `Snowflake` service.
#[derive(Clone)]
pub struct Snowflake {
    door: Door,
}

impl Snowflake {
    /// The service over `door`.
    pub fn new(door: Door) -> Self {
        Self { door }
    }

    /// `count` ids as `i64`, within the caller's deadline. Every id of a layout is below 2^63
    /// (its sign bit is 0), so the conversion never fails; if it did, `internal`, never a
    /// negative id.
    async fn take(
        &self,
        who: CallCredentials,
        count: u32,
        limit: Option<std::time::Duration>,
    ) -> Result<Vec<i64>, Status> {
        let ids = self
            .door
            .run(limit, move |s| async move {
                s.next_snowflake_ids(&who, count as usize).await
            })
            .await?;
        ids.into_iter()
            .map(|id| i64::try_from(id).map_err(|_| Error::Internal.into()))
            .collect()
    }
}

#[tonic::async_trait]
impl pb::snowflake_server::Snowflake for Snowflake {
    async fn next_ids(
        &self,
        req: Request<pb::SnowflakeIdsRequest>,
    ) -> Result<Response<pb::IdsReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let ids = self.take(who, req.into_inner().count, limit).await?;
        Ok(Response::new(pb::IdsReply {
            biz_tag: String::new(),
            ids,
            strict: false,
        }))
    }

    async fn next_ranges(
        &self,
        req: Request<pb::SnowflakeIdsRequest>,
    ) -> Result<Response<pb::RangesReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let ids = self.take(who, req.into_inner().count, limit).await?;
        let mut runs = IdRuns::new();
        for id in ids {
            runs.push_run(id, 1);
        }
        Ok(Response::new(super::segment::runs_reply("", &runs)))
    }

    async fn decode(
        &self,
        req: Request<pb::SnowflakeDecodeRequest>,
    ) -> Result<Response<pb::SnowflakeDecodeReply>, Status> {
        let engine = self.door.ids().snowflake()?;
        let id = req.into_inner().id;
        let Ok(unsigned) = u64::try_from(id) else {
            return Err(Error::InvalidId(format!(
                "id {id} is not an integer within 0..={}",
                i64::MAX
            ))
            .into());
        };
        // The same fields as the HTTP decode routes, from the same function.
        let body = decode_body(engine.layout(), unsigned, Default::default());
        Ok(Response::new(pb::SnowflakeDecodeReply {
            id,
            layout: body.layout,
            prefix: body.prefix,
            time_delta: body.time_delta,
            timestamp: body.timestamp,
            worker_id: body.worker_id,
            clock_back: body.clock_back.unwrap_or(0),
            sequence: body.sequence,
        }))
    }

    async fn bounds(
        &self,
        req: Request<pb::BoundsRequest>,
    ) -> Result<Response<pb::BoundsReply>, Status> {
        let m = req.into_inner();
        let (min, max) = self
            .door
            .ids()
            .snowflake_bounds(m.from_unix_ms, m.to_unix_ms)?;
        let as_id = |v: u64| i64::try_from(v).map_err(|_| Status::from(Error::Internal));
        Ok(Response::new(pb::BoundsReply {
            min_id: as_id(min)?,
            max_id: as_id(max)?,
        }))
    }
}
