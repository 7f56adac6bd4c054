package leafid

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// batch holds the ids of one 200 answer, handed out in order by index.
type batch struct {
	// ids are strictly increasing, and above every id of the supply's earlier batches.
	ids []int64
	// preloadAt is the index whose taker starts the refill of the next batch: 10% of the batch,
	// as the server preloads its next segment.
	preloadAt int64
	// _ keeps taken off the cache line of the read-only fields every taker reads.
	_ [64]byte
	// taken counts the indexes handed out; the caller that takes i < len(ids) owns ids[i]. It
	// runs past len(ids) once the batch is spent (each late caller adds one).
	taken atomic.Int64
	// _ keeps taken off the next allocation's cache line.
	_ [56]byte
}

func newBatch(ids []int64) *batch {
	return &batch{ids: ids, preloadAt: int64(len(ids) / 10)}
}

func (b *batch) exhausted() bool { return b.taken.Load() >= int64(len(b.ids)) }

// served is how many of the batch's ids were handed out.
func (b *batch) served() int64 {
	t := b.taken.Load()
	if n := int64(len(b.ids)); t > n {
		return n
	}
	return t
}

// supply is one local id stream (a segment tag, or snowflake), double-buffered like the server's
// SegmentBuffer: the current batch and at most one next batch.
//
// The fast path of nextID is one atomic add on the current batch's index. The caller that takes
// the preload mark (10%) starts the single-flight refill, a goroutine that fetches the next
// batch; when the current batch is spent, the first caller to find it so promotes the next one,
// and callers that find no next batch wait for the refill (up to the wait timeout).
//
// Invariants:
//   - No id twice: an index is taken by one caller (the atomic add), and batches are disjoint
//     (every accepted batch is cut to the ids above the floor, the largest id accepted before).
//   - Only received ids: a batch is built only from a 200 body that passed parseBatch.
//   - Increasing: if one nextID call returns before another starts, the second id is larger.
//     Within a batch, the later add gets the larger index; a batch is replaced only once spent,
//     and every id of a later batch is above every id of an earlier one (the floor).
type supply struct {
	// current is the batch being served; replaced only by a promotion, under mu, once spent.
	current atomic.Pointer[batch]
	// client owns the servers, the settings and the background goroutines.
	client *Client
	// req is this supply's batch request (nil for a fixed supply, which never fetches).
	req *request
	// refilling is true while one refill goroutine runs (single flight).
	refilling atomic.Bool

	// mu guards the fields below; held for a few instructions, never across a request.
	mu sync.Mutex
	// next is the batch to serve after current, once fetched.
	next *batch
	// floor is the largest id accepted into a batch so far (0 before the first: ids are
	// positive). Fetched ids at or below it are cut.
	floor int64
	// refused is the refusal of the last refill; waiting callers return it. Cleared when a new
	// refill starts.
	refused *RejectedError
	// lastFault is the last server failure of the refills, for UnavailableError; cleared by a
	// delivered batch.
	lastFault *ServerFault
	// wake is closed (and replaced) when a refill ends, successful or not.
	wake chan struct{}
	// retired counts the ids of batches replaced by a promotion (all handed out).
	retired int64

	// batches counts accepted batches (at least one id above the floor).
	batches atomic.Uint64
	// received counts ids received in 200 bodies, discarded ones included.
	received atomic.Uint64
	// discarded counts received ids never handed out because they were not above the floor.
	discarded atomic.Uint64
	// behindRounds counts answers cut to nothing (tests read it).
	behindRounds atomic.Uint64
}

func newSupply(c *Client, req *request, ids []int64) *supply {
	s := &supply{client: c, req: req, wake: make(chan struct{})}
	if len(ids) > 0 {
		s.floor = ids[len(ids)-1]
	}
	s.current.Store(newBatch(ids))
	return s
}

// tryNextID is the fast path: an id of the current batch, or false when it is spent.
func (s *supply) tryNextID() (int64, bool) {
	b := s.current.Load()
	i := b.taken.Add(1) - 1
	if i >= int64(len(b.ids)) {
		return 0, false
	}
	if i == b.preloadAt {
		s.startRefill()
	}
	return b.ids[i], true
}

// nextID is the next id: the fast path, else promote the next batch or wait for the refill.
func (s *supply) nextID(ctx context.Context) (int64, error) {
	if s.client.closed.Load() {
		return 0, ErrClosed
	}
	if id, ok := s.tryNextID(); ok {
		return id, nil
	}
	return s.nextIDSlow(ctx)
}

func (s *supply) nextIDSlow(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	started := time.Now()
	timer := time.NewTimer(s.client.cfg.WaitTimeout)
	defer timer.Stop()
	// A refusal counts only from a refill this call waited for, not one from before.
	waited := false
	for {
		// Taken before the checks below, so a refill ending between a check and the wait still
		// wakes this caller.
		s.mu.Lock()
		wake := s.wake
		s.mu.Unlock()
		if id, ok := s.tryNextID(); ok {
			return id, nil
		}
		s.mu.Lock()
		if !s.current.Load().exhausted() {
			// Another caller promoted already: retry the fast path on the new batch.
			s.mu.Unlock()
			continue
		}
		if s.next != nil {
			old := s.current.Load()
			s.retired += int64(len(old.ids))
			s.current.Store(s.next)
			s.next = nil
			s.mu.Unlock()
			continue
		}
		if waited && s.refused != nil {
			err := *s.refused
			s.mu.Unlock()
			return 0, &err
		}
		s.mu.Unlock()
		if s.client.closed.Load() {
			return 0, ErrClosed
		}
		s.startRefill()
		waited = true
		select {
		case <-wake:
		case <-timer.C:
			s.mu.Lock()
			last := s.lastFault
			s.mu.Unlock()
			return 0, &UnavailableError{Waited: time.Since(started), Last: last}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.client.stop.Done():
			return 0, ErrClosed
		}
	}
}

// startRefill starts the refill goroutine unless one runs, the next batch is already there, or
// the client is closed.
func (s *supply) startRefill() {
	if s.req == nil || s.refilling.Swap(true) {
		return
	}
	s.mu.Lock()
	if s.next != nil {
		s.mu.Unlock()
		s.refilling.Store(false)
		return
	}
	s.refused = nil
	s.mu.Unlock()
	if !s.client.spawn(s.refill) {
		s.refilling.Store(false)
	}
}

// refill fetches one batch above the floor into next, retrying failed rounds with backoff for
// at most the wait timeout (then the next caller that needs a batch starts another).
func (s *supply) refill(ctx context.Context) {
	c := s.client
	deadline := time.Now().Add(c.cfg.WaitTimeout)
	failures := 0
	filled := false
	count := s.req.count
	for ctx.Err() == nil {
		s.mu.Lock()
		floor := s.floor
		s.mu.Unlock()
		res := c.servers.fetch(ctx, s.req, count, floor)
		var wait time.Duration
		if res.behind != nil {
			// Its tail showed it wholly at or below the floor: discarded unparsed.
			n := uint64(res.behind.ids)
			s.received.Add(n)
			s.discarded.Add(n)
			s.mu.Lock()
			s.lastFault = &ServerFault{Server: res.server, Kind: FaultBehind,
				Detail: fmt.Sprintf("%d ids up to %d, none above %d", n, res.behind.last, s.floor)}
			s.mu.Unlock()
			s.behindRounds.Add(1)
			count = catchUpCount(floor, res.behind.last, s.req.count)
		} else if res.ids != nil {
			ids := res.ids
			s.received.Add(uint64(len(ids)))
			s.mu.Lock()
			// Ids are strictly increasing: the ones at or below the floor are a prefix.
			last := ids[len(ids)-1]
			cut := sort.Search(len(ids), func(i int) bool { return ids[i] > floor })
			if cut > 0 {
				s.discarded.Add(uint64(cut))
				ids = ids[cut:]
			}
			if len(ids) > 0 {
				s.floor = ids[len(ids)-1]
				s.next = newBatch(ids)
				s.lastFault = nil
				s.batches.Add(1)
				filled = true
			} else {
				s.lastFault = &ServerFault{Server: res.server, Kind: FaultBehind,
					Detail: fmt.Sprintf("%d ids, none above %d", cut, floor)}
			}
			s.mu.Unlock()
			if filled {
				break
			}
			// Nothing above the floor: this server is behind the one used before (a lower
			// segment, or snowflake ids of older ticks): the catch-up (catchUpCount). The
			// deadline still bounds the loop.
			s.behindRounds.Add(1)
			count = catchUpCount(floor, last, s.req.count)
		} else if res.rejected != nil {
			s.mu.Lock()
			s.refused = res.rejected
			s.mu.Unlock()
			break
		} else {
			s.mu.Lock()
			if res.fault != nil {
				s.lastFault = res.fault
			}
			s.mu.Unlock()
			failures++
			wait = c.servers.backoff(failures)
		}
		if !time.Now().Add(wait).Before(deadline) {
			break
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
	s.refilling.Store(false)
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
	// A caller may have passed the preload mark of a batch promoted while this goroutine still
	// held the flag: its startRefill was then a no-op, so start the next one here.
	if filled && s.wantsNext() {
		s.startRefill()
	}
}

// catchUpCount is the catch-up rule: after an answer lying wholly at or below the floor (its
// server is behind the one used before: a lower segment of a lagging or restored database, or
// snowflake ids of older ticks), the next request follows at once, without a pause, and asks for
// enough ids to pass the floor: those from the answer's last id up to the floor, plus a batch,
// within batch..=MaxBatch (the server's limit). A segment server advances only as its ids are
// taken and its next ids follow its last ones, so a gap within one request is passed in one
// step; a larger one takes one MaxBatch request per 100000 ids, each discarded (counted in
// DiscardedIDs).
func catchUpCount(floor, last int64, batch int) int {
	gap := uint64(floor - last) // floor >= last > 0: no overflow
	if gap >= MaxBatch || int(gap)+batch >= MaxBatch {
		return MaxBatch
	}
	return int(gap) + batch
}

// wantsNext: no next batch, and the current one is past its preload mark.
func (s *supply) wantsNext() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current.Load()
	return s.next == nil && cur.taken.Load() > cur.preloadAt
}

// stats adds this supply's counters to st.
func (s *supply) stats(st *Stats) {
	s.mu.Lock()
	served := s.retired + s.current.Load().served()
	s.mu.Unlock()
	st.IDsServed += uint64(served)
	st.Batches += s.batches.Load()
	st.IDsReceived += s.received.Load()
	st.DiscardedIDs += s.discarded.Load()
}
