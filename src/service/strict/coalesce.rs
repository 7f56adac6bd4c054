//! Hops to a strict tag's owner, coalesced: requests that arrive while a hop of their tag is on
//! its way wait for it to end, then go together in one hop, and its ids are split among them
//! (group commit). Under load one HTTP round trip then serves many requests.
//!
//! # Why real-time order still holds
//!
//! A request joins the queue when it arrives, and a hop carries only requests that were
//! queued before the hop was sent (the batch is taken under the queue's lock, then sent). The
//! owner hands out ids above every id whose answer was complete before the hop reached it
//! (`crate::segment::strict`), so above every id whose answer was complete before any of the
//! batch's requests was sent. Within one batch every request was in flight at once, so no
//! order is owed between them; they are still given their ids in arrival order.
//!
//! # Why no id is handed out twice or lost to a wrong caller
//!
//! The hop's answer is checked as before (increasing, positive, at most what was asked), then
//! cut into consecutive pieces of each request's count, each piece sent to one request once.
//! A request that went away (its deadline passed) leaves its piece a gap, never handed out
//! again. If the owner gave fewer ids than the batch asked, the requests it cannot fill get no
//! id and look at the owner row again, as after a failed hop.
//!
//! # Bounds
//!
//! One queue per strict tag this server was asked for (the tags map's bound); one hop carries
//! at most [`MAX_HOP_IDS`] ids (the forward route's limit); the requests of one batch share one
//! owner address and key (a request that saw another row waits for the next batch).

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::hop::Forward;
use super::{Event, StrictService};
use crate::segment::BizTag;
use crate::service::MAX_COUNT;

/// Most ids one hop asks for: the owner's forward route takes at most this many.
pub const MAX_HOP_IDS: usize = MAX_COUNT as usize;

/// The requests of one tag waiting for a hop, and whether a hop of the tag is on its way.
#[derive(Default)]
pub(super) struct HopQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    /// A task is sending this tag's hops (it ends when the queue is empty).
    running: bool,
    waiting: Vec<Waiting>,
}

/// One request waiting for a hop.
struct Waiting {
    address: String,
    key: String,
    count: usize,
    until: Instant,
    answer: oneshot::Sender<Result<Vec<i64>, Forward>>,
}

impl HopQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next batch: the first waiting request and every later one for the same owner
    /// address and key, in arrival order, up to [`MAX_HOP_IDS`] ids; requests that went away
    /// are dropped. `None` (and the sender stops) when nothing is waiting.
    fn next_batch(&self) -> Option<Vec<Waiting>> {
        let mut st = self.lock();
        st.waiting.retain(|w| !w.answer.is_closed());
        let Some(first) = st.waiting.first() else {
            st.running = false;
            return None;
        };
        let (address, key) = (first.address.clone(), first.key.clone());
        let (mut batch, mut rest, mut ids) = (Vec::new(), Vec::new(), 0usize);
        for w in st.waiting.drain(..) {
            let fits = batch.is_empty() || ids + w.count <= MAX_HOP_IDS;
            if fits && w.address == address && w.key == key {
                ids += w.count;
                batch.push(w);
            } else {
                rest.push(w);
            }
        }
        st.waiting = rest;
        Some(batch)
    }
}

impl StrictService {
    /// Up to `count` ids of `tag` from its owner at `address` (presenting `key`), through the
    /// tag's queue of hops; at most until `until`.
    pub(super) async fn forward_coalesced(
        self: &Arc<Self>,
        address: &str,
        key: &str,
        tag: &BizTag,
        count: usize,
        until: Instant,
    ) -> Result<Vec<i64>, Forward> {
        let Some(queue) = self.hop_queue(tag) else {
            return Err(Forward::Retry);
        };
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut st = queue.lock();
            st.waiting.push(Waiting {
                address: address.to_owned(),
                key: key.to_owned(),
                count: count.clamp(1, MAX_HOP_IDS),
                until,
                answer,
            });
            !std::mem::replace(&mut st.running, true)
        };
        if start {
            let (service, tag) = (self.clone(), tag.clone());
            // On the main runtime, as the hops themselves: the sender outlives any one worker.
            self.runtime
                .spawn(async move { service.send_hops(&queue, &tag).await });
        }
        match tokio::time::timeout_at(until, answered).await {
            Ok(Ok(answer)) => answer,
            // The deadline passed (its piece, if any, is a gap), or the sender went away.
            _ => Err(Forward::Retry),
        }
    }

    /// Sends the tag's batches one after another until its queue is empty.
    async fn send_hops(&self, queue: &HopQueue, tag: &BizTag) {
        // Should this task unwind, the next request starts another sender (the waiting ones
        // get `Retry` as their answers drop, and look at the owner row again).
        struct Unwinding<'a>(&'a HopQueue);
        impl Drop for Unwinding<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.lock().running = false;
                }
            }
        }
        let _unwinding = Unwinding(queue);
        while let Some(batch) = queue.next_batch() {
            let asked: usize = batch.iter().map(|w| w.count).sum();
            let until = batch
                .iter()
                .map(|w| w.until)
                .max()
                .unwrap_or_else(Instant::now);
            let (address, key) = (&batch[0].address, &batch[0].key);
            self.count(Event::HopSent);
            let answer = self.forward(address, key, tag, asked, until).await;
            split(batch, answer);
        }
    }
}

/// Hands each request of `batch` its piece of the hop's `answer`: consecutive ids, its count
/// each, in arrival order; the requests it cannot fill (and every request of a failed hop) get
/// the failure or `Retry`.
fn split(batch: Vec<Waiting>, answer: Result<Vec<i64>, Forward>) {
    match answer {
        Ok(ids) => {
            let mut rest = ids.as_slice();
            for w in batch {
                if rest.len() >= w.count {
                    let (piece, after) = rest.split_at(w.count);
                    rest = after;
                    // A request that went away: its piece is a gap.
                    let _ = w.answer.send(Ok(piece.to_vec()));
                } else {
                    rest = &[];
                    let _ = w.answer.send(Err(Forward::Retry));
                }
            }
        }
        Err(failure) => {
            for w in batch {
                let _ = w.answer.send(Err(failure.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(
        count: usize,
        address: &str,
    ) -> (Waiting, oneshot::Receiver<Result<Vec<i64>, Forward>>) {
        let (answer, rx) = oneshot::channel();
        let w = Waiting {
            address: address.into(),
            key: "k".into(),
            count,
            until: Instant::now(),
            answer,
        };
        (w, rx)
    }

    #[test]
    fn a_hop_s_ids_are_cut_in_arrival_order_and_a_short_answer_fills_the_first() {
        let (a, mut ra) = waiting(2, "x");
        let (b, mut rb) = waiting(3, "x");
        let (c, mut rc) = waiting(1, "x");
        split(vec![a, b, c], Ok(vec![10, 11, 12, 13, 14]));
        assert_eq!(ra.try_recv().unwrap().unwrap(), [10, 11]);
        assert_eq!(rb.try_recv().unwrap().unwrap(), [12, 13, 14]);
        assert!(matches!(rc.try_recv().unwrap(), Err(Forward::Retry)));
    }

    #[test]
    fn a_batch_holds_one_owner_and_at_most_a_hop_s_ids() {
        let q = HopQueue::default();
        let mut keep = Vec::new();
        for (count, address) in [
            (60_000, "x"),
            (10, "y"),
            (30_000, "x"),
            (20_000, "x"),
            (5, "x"),
        ] {
            let (w, rx) = waiting(count, address);
            keep.push(rx);
            q.lock().waiting.push(w);
        }
        let counts = |b: Vec<Waiting>| {
            b.iter()
                .map(|w| (w.count, w.address.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            counts(q.next_batch().unwrap()),
            [(60_000, "x".into()), (30_000, "x".into()), (5, "x".into())]
        );
        assert_eq!(counts(q.next_batch().unwrap()), [(10, "y".into())]);
        assert_eq!(counts(q.next_batch().unwrap()), [(20_000, "x".into())]);
        assert!(q.next_batch().is_none());
        assert!(!q.lock().running);
        // A request that went away is not sent.
        let (w, rx) = waiting(1, "x");
        q.lock().waiting.push(w);
        drop(rx);
        assert!(q.next_batch().is_none());
    }
}
