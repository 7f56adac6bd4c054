//! `leafid.v1.Segment`: a plain tag's ids as a list and as runs, a formatted tag's texts and
//! their decode, and `StreamRanges`. Each call parses its message,
//! asks the [`IdService`](crate::service::IdService) (the same calls as `crate::http::segment`) and writes the answer:
//! which engine, lane or format serves, and every id rule, are the service's.

use std::pin::Pin;

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::caller::{CallCredentials, deadline, within};
use super::door::Door;
use super::pb;
use crate::error::Error;
use crate::segment::{BizTag, IdRuns, IdSink};
use crate::service::segment::check_count;
use crate::service::{Ids, MAX_RANGE_COUNT};

/// Most ids one `StreamRanges` call may ask for in all.
pub const MAX_STREAM_COUNT: u64 = 1_000_000_000;

/// A `StreamRanges` message's ids when the call says none (`chunk = 0`).
pub const DEFAULT_CHUNK: u64 = 100_000;

/// The `Segment` service.
#[derive(Clone)]
pub struct Segment {
    door: Door,
}

impl Segment {
    /// The service over `door`.
    pub fn new(door: Door) -> Self {
        Self { door }
    }
}

/// The runs of an answer as messages.
pub fn runs_reply(tag: &str, runs: &IdRuns) -> pb::RangesReply {
    pb::RangesReply {
        biz_tag: tag.to_owned(),
        count: runs.taken(),
        ranges: runs
            .runs()
            .iter()
            .map(|r| pb::IdRun {
                first: r.first,
                last: r.last,
            })
            .collect(),
        strict: runs.is_strict(),
    }
}

#[tonic::async_trait]
impl pb::segment_server::Segment for Segment {
    async fn next_ids(
        &self,
        req: Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::IdsReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let m = req.into_inner();
        BizTag::validate(&m.biz_tag).map_err(Error::from)?;
        // u32 -> usize never truncates on the 32- and 64-bit targets this builds for; the
        // service bounds the count (1..=100000, else `invalid_count`).
        let count = m.count as usize;
        let ids = self
            .door
            .within(limit, self.door.ids().next_ids(&who, &m.biz_tag, count))
            .await?;
        let (ids, strict) = match ids {
            Ids::Numbers(ids) => (ids, false),
            Ids::Strict(ids) => (ids, true),
            Ids::Texts(_) => {
                return Err(Error::InvalidRequest(format!(
                    "biz_tag \"{}\" is formatted: its ids are text (NextFormattedIds)",
                    m.biz_tag
                ))
                .into());
            }
        };
        Ok(Response::new(pb::IdsReply {
            biz_tag: m.biz_tag,
            ids,
            strict,
        }))
    }

    async fn next_ranges(
        &self,
        req: Request<pb::NextRangesRequest>,
    ) -> Result<Response<pb::RangesReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let m = req.into_inner();
        BizTag::validate(&m.biz_tag).map_err(Error::from)?;
        let (tag, count) = (m.biz_tag.clone(), m.count);
        let runs = self
            .door
            .run(limit, move |s| async move {
                s.next_runs(&who, &tag, count).await
            })
            .await?;
        Ok(Response::new(runs_reply(&m.biz_tag, &runs)))
    }

    async fn next_formatted_ids(
        &self,
        req: Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::FormattedIdsReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let m = req.into_inner();
        BizTag::validate(&m.biz_tag).map_err(Error::from)?;
        let (tag, count) = (m.biz_tag.clone(), m.count as usize);
        let ids = self
            .door
            .run(limit, move |s| async move {
                s.next_ids(&who, &tag, count).await
            })
            .await?;
        let Ids::Texts(f) = ids else {
            // Numbers taken for a call that asked for text: a gap, never handed out again.
            return Err(Error::InvalidRequest(format!(
                "biz_tag \"{}\" is not formatted: its ids are numbers (NextIds)",
                m.biz_tag
            ))
            .into());
        };
        let mut texts = Vec::with_capacity(f.len());
        f.for_each(|id| {
            texts.push(id.to_owned());
            Ok::<_, Error>(())
        })?;
        Ok(Response::new(pb::FormattedIdsReply {
            biz_tag: m.biz_tag,
            ids: texts,
            period: f.period.clone(),
            period_end: f.period_end.to_string(),
            ordered: f.ordered(),
        }))
    }

    async fn decode(
        &self,
        req: Request<pb::DecodeRequest>,
    ) -> Result<Response<pb::DecodeReply>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let m = req.into_inner();
        let tag = BizTag::parse(&m.biz_tag).map_err(Error::from)?;
        let id = m.id.clone();
        let d = self
            .door
            .run(
                limit,
                move |s| async move { s.decode(&who, &tag, &id).await },
            )
            .await?;
        Ok(Response::new(pb::DecodeReply {
            biz_tag: m.biz_tag,
            id: m.id,
            period: d.period,
            sequence: d.sequence,
        }))
    }

    type StreamRangesStream = Pin<Box<dyn Stream<Item = Result<pb::RangesReply, Status>> + Send>>;

    /// `count` ids as messages of at most `chunk` ids. Flow control: a channel of one message
    /// between the task that takes ids and the transport; the task takes the next chunk only
    /// once it holds the channel's one slot, that is once the transport took the previous
    /// message. Why no id is handed out twice or held: each chunk is one `next_runs` of the
    /// service (leased before it is handed out, as every id); a reader that goes away closes
    /// the channel, the task stops at its next reservation, and the ids of the chunk it held
    /// are a gap, never handed out again.
    async fn stream_ranges(
        &self,
        req: Request<pb::StreamRangesRequest>,
    ) -> Result<Response<Self::StreamRangesStream>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let m = req.into_inner();
        BizTag::validate(&m.biz_tag).map_err(Error::from)?;
        check_count(m.count, MAX_STREAM_COUNT)?;
        let chunk = match m.chunk {
            0 => DEFAULT_CHUNK,
            c => {
                check_count(c, MAX_RANGE_COUNT)?;
                c
            }
        };
        // The caller first, so a refused caller gets the call's status, not a stream.
        self.door.ids().admit_ids(&who, &m.biz_tag)?;
        let (tx, rx) = mpsc::channel(1);
        let ids = self.door.ids().clone();
        let span = tracing::info_span!("grpc_stream", biz_tag = %m.biz_tag, count = m.count, chunk);
        // The caller's deadline is the whole stream's: each chunk waits at most what is left.
        let until = limit.map(|d| tokio::time::Instant::now() + d);
        let task = async move {
            let tag = m.biz_tag;
            let mut left = m.count;
            while left > 0 {
                // The slot first, then the ids: no id is taken for a reader that is not there.
                let Ok(slot) = tx.reserve().await else {
                    tracing::debug!(biz_tag = %tag, left, "stream reader gone");
                    return;
                };
                let asked = left.min(chunk);
                let limit = until.map(|u| u.saturating_duration_since(tokio::time::Instant::now()));
                match within(limit, async { Ok(ids.next_runs(&who, &tag, asked).await?) }).await {
                    Ok(runs) => {
                        // `next_runs` hands out at least one id or an error; the guard keeps a
                        // broken promise from looping forever.
                        let taken = runs.taken();
                        if taken == 0 {
                            slot.send(Err(Error::Internal.into()));
                            return;
                        }
                        left = left.saturating_sub(taken);
                        slot.send(Ok(runs_reply(&tag, &runs)));
                    }
                    Err(status) => {
                        slot.send(Err(status));
                        return;
                    }
                }
            }
        };
        // Detached: it ends with the stream.
        drop(tokio::spawn(task.instrument(span)));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type PullRangesStream = Pin<Box<dyn Stream<Item = Result<pb::RangesReply, Status>> + Send>>;

    /// Client-paced ranges: one `next_runs` of the service per ask, answered by one message.
    /// Why no id is taken that the reader did not ask for: the task reads the next ask before
    /// it takes anything, so ids are taken only for asks received; an answer the reader asked
    /// for and never read (it went away) is a gap, never handed out again. The caller's
    /// deadline bounds the whole call; the first error ends it.
    async fn pull_ranges(
        &self,
        req: Request<tonic::Streaming<pb::PullRequest>>,
    ) -> Result<Response<Self::PullRangesStream>, Status> {
        let (who, limit) = (CallCredentials::of(&req), deadline(&req));
        let until = limit.map(|d| tokio::time::Instant::now() + d);
        let mut asks = req.into_inner();
        let (tx, rx) = mpsc::channel(1);
        let ids = self.door.ids().clone();
        let span = tracing::info_span!("grpc_pull");
        let task = async move {
            loop {
                let ask = match asks.message().await {
                    Ok(Some(ask)) => ask,
                    // The reader closed its side (or went away): done.
                    Ok(None) => return,
                    Err(status) => {
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                };
                let limit = until.map(|u| u.saturating_duration_since(tokio::time::Instant::now()));
                let answer = within(limit, async {
                    BizTag::validate(&ask.biz_tag).map_err(Error::from)?;
                    Ok(ids.next_runs(&who, &ask.biz_tag, ask.count).await?)
                })
                .await
                .map(|runs| runs_reply(&ask.biz_tag, &runs));
                let failed = answer.is_err();
                if tx.send(answer).await.is_err() || failed {
                    return;
                }
            }
        };
        drop(tokio::spawn(task.instrument(span)));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
