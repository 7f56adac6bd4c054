package leafid

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// span is one run of consecutive ids, base+1 ..= base+size, handed out by one counter. Only
// taken changes; every other field is written before the span is published (current.Store) and
// only read after.
type span struct {
	// taken counts the adds: the caller whose add returns n owns the id base+n if n <= size. It
	// runs past size once the span is spent (each late caller adds one; int64 does not wrap in
	// any real lifetime).
	taken atomic.Int64
	// base is the first id minus 1 (>= 0: ids are positive, so base+n never overflows for n <=
	// size).
	base int64
	// size is the run's id count (0 for the empty span a supply starts with and the one Close
	// puts in place: every call on it takes the slow path).
	size int64
	// preload is the n whose taker starts the refill of the next batch (10% of the batch), 0
	// when the mark lies in another span of the batch.
	preload int64
	// batch is the batch this span belongs to (nil for the empty spans).
	batch *batch
	// index is this span's place in batch.spans.
	index int
	// before counts the ids of the batch's earlier spans.
	before int64
	// _ keeps the next allocation off taken's cache line.
	_ [64]byte
}

// served is how many of the span's ids were handed out (or are being: owned by a caller).
func (r *span) served() int64 {
	if t := r.taken.Load(); t < r.size {
		return t
	}
	return r.size
}

// batch is the runs of one accepted 200 answer, cut to the ids above the floor.
type batch struct {
	// spans are increasing, disjoint, and above every id of the supply's earlier batches.
	spans []*span
	// total is the batch's id count.
	total int64
	// since is when the batch became current (under the supply's mu), for the demand rule.
	since time.Time
}

// newBatch builds the spans of runs, with the preload mark at 10% of the batch, as the server
// preloads its next segment.
func newBatch(runs []idRun) *batch {
	b := &batch{spans: make([]*span, len(runs))}
	for i, r := range runs {
		b.spans[i] = &span{base: r.first - 1, size: r.last - r.first + 1, batch: b, index: i, before: b.total}
		b.total += r.last - r.first + 1
	}
	mark := b.total / 10 // the 0-based place in the batch of the id whose taker starts the refill
	for _, r := range b.spans {
		if mark >= r.before && mark < r.before+r.size {
			r.preload = mark - r.before + 1
		}
	}
	return b
}

// used is how many ids of the batch were handed out, given its current span r.
func (b *batch) used(r *span) int64 { return r.before + r.served() }

// supply is one local id stream (a segment tag, or snowflake), double-buffered like the server's
// SegmentBuffer: the current batch (a short list of runs) and at most one next batch.
//
// The local path (nextID) is one atomic add on the current span's counter and one compare with
// its size: no lock, no allocation. The caller that takes the preload mark starts the
// single-flight refill, a goroutine that fetches the next batch. A caller whose add passes the
// end takes the slow path: under mu it moves current to the batch's next span, or to the next
// batch's first, or waits for the refill (up to the wait timeout).
//
// Invariants (why the add and the switch are enough):
//   - No id twice: within a span, each add returns a distinct n, and only n <= size maps to an
//     id. Spans are disjoint: the runs of a body do not overlap, and every accepted batch is cut
//     to the ids above the floor (the largest id accepted before). The empty spans hold no id.
//   - Only received ids: a span is built only from a 200 body that passed parseRanges.
//   - Increasing across callers (if call A returns before call B starts, B's id is larger):
//     the atomics are sequentially consistent. Within one span, B's add comes after A's in the
//     counter's order, so it returns a larger n. A span is replaced only by a caller whose own
//     add returned n > size, so it was spent: no caller can take an id of it after the switch
//     (later adds return more than size), and every later span lies above it. If A took its id
//     from span S, the store publishing S came before A's load; B's load comes after A returned,
//     so B sees S or a later span: a larger n in S, or an id above all of S.
//   - No id after Close returned: Close puts an empty span in place under mu, and the slow path
//     checks closed under mu before it switches, so no span is published after that.
//
// Strict tags (issue 45): pass-through. A strict tag's ids are in real-time order across
// servers: every id is greater than every id whose answer was complete before its request was
// sent. A local buffer would break that between two client processes (P1 holds 100..150 and
// hands out 100; P2 gets 200; P1 then hands out 101 to a call that began after P2's answer). So
// the first answer with "strict": true switches the supply to pass-through for good
// (goStrictLocked): the ids it holds and that answer's (they may have been fetched before some
// waiting call began) are dropped and counted in DiscardedIDs; an empty span is published, so
// every later call takes the slow path; no refill starts again (startRefill); each call sends
// its own request for one id (passThrough). Safe: the id a call returns was issued after the
// call began, so the server's order covers it; dropping ids never breaks a rule. As a second
// line, a call refuses (discards, and asks again) an id at or below the floor it read before
// sending: every id accepted before was complete before its request was sent, so a correct
// server never answers one, and one that did (an older server) never reaches a caller.
type supply struct {
	// current is the *span being served: replaced only under mu (publish), once spent (or by
	// Close). An unsafe.Pointer read by atomic.LoadPointer rather than an atomic.Pointer[span]:
	// Go 1.19 does not inline the generic Load, and nextID must stay inlinable.
	current unsafe.Pointer
	// _ keeps current's cache line (read by every call) free of the fields written below.
	_ [56]byte
	// client owns the servers, the settings and the background goroutines.
	client *Client
	// req is this supply's range request (nil for a fixed supply, which never fetches).
	req *request
	// refilling is true while one refill goroutine runs (single flight).
	refilling atomic.Bool

	// mu guards the fields below; held for a few instructions, never across a request.
	mu sync.Mutex
	// next is the batch to serve after current's, once fetched.
	next *batch
	// floor is the largest id accepted into a batch so far (0 before the first: ids are
	// positive). Fetched ids at or below it are cut.
	floor int64
	// refused is the refusal of the last refill; waiting callers return it. Cleared when a new
	// refill starts.
	refused error
	// lastFault is the last server failure of the refills, for UnavailableError; cleared by a
	// delivered batch.
	lastFault *ServerFault
	// wake is closed (and replaced) when a refill ends, successful or not.
	wake chan struct{}
	// retired counts the ids of spans replaced by a switch (all handed out).
	retired int64
	// size is the ids the next request asks for (the demand rule, nextBatchSize), within
	// minSize..=maxSize.
	size, minSize, maxSize int
	// starved is set by a caller that had to wait because both batches were spent; the next
	// sizing doubles the size and clears it.
	starved bool
	// strict is pass-through (a strict tag, see above): no local batch, one request per id. Set
	// for good by goStrictLocked.
	strict bool
	// passed counts the ids handed out by passThrough.
	passed atomic.Int64

	// batches counts accepted batches (at least one id above the floor).
	batches atomic.Uint64
	// received counts ids received in 200 bodies, discarded ones included.
	received atomic.Uint64
	// discarded counts received ids never handed out because they were not above the floor.
	discarded atomic.Uint64
	// behindRounds counts answers cut to nothing (tests read it).
	behindRounds atomic.Uint64
}

// load is the current span (an atomic load: it sees the span's fields as publish wrote them).
func (s *supply) load() *span { return (*span)(atomic.LoadPointer(&s.current)) }

// publish makes r the current span (under mu).
func (s *supply) publish(r *span) { atomic.StorePointer(&s.current, unsafe.Pointer(r)) }

func newSupply(c *Client, req *request, minSize, maxSize int) *supply {
	s := &supply{client: c, req: req, wake: make(chan struct{}), size: minSize, minSize: minSize, maxSize: maxSize}
	s.publish(&span{})
	return s
}

// nextID is the next id: the local path, else nextIDSlow. Small enough to be inlined into the
// caller: one load of current, one add, two compares (the end, the preload mark).
func (s *supply) nextID(ctx context.Context) (int64, error) {
	r := s.load()
	n := r.taken.Add(1)
	if n <= r.size && n != r.preload {
		return r.base + n, nil
	}
	return s.nextIDSlow(ctx, r, n)
}

// tryNextID is an id of the local batches if they hold one (switching spans or promoting the
// next batch if needed), else false, and then the refill is started. Never waits.
func (s *supply) tryNextID() (int64, bool) {
	r := s.load()
	n := r.taken.Add(1)
	if n <= r.size && n != r.preload {
		return r.base + n, true
	}
	return s.tryNextIDSlow(r, n)
}

// tryNextIDSlow is tryNextID past the local path: n, the add's result on r, is the preload mark
// (the id is this caller's) or lies past the end.
func (s *supply) tryNextIDSlow(r *span, n int64) (int64, bool) {
	if n <= r.size {
		s.startRefill()
		return r.base + n, true
	}
	s.mu.Lock()
	if s.client.closed.Load() {
		s.mu.Unlock()
		return 0, false
	}
	id, ok, refill := s.takeLocked()
	s.mu.Unlock()
	if refill || !ok {
		s.startRefill()
	}
	return id, ok
}

// takeLocked (under mu) takes an id, moving current to the next span or batch while it is
// spent; ok is false when no local id is left. refill says the caller took the preload mark.
func (s *supply) takeLocked() (id int64, ok, refill bool) {
	for {
		r := s.load()
		if n := r.taken.Add(1); n <= r.size {
			return r.base + n, true, n == r.preload
		}
		// r is spent (this add returned n > size): switching cannot lose an id.
		var nr *span
		if b := r.batch; b != nil && r.index+1 < len(b.spans) {
			nr = b.spans[r.index+1]
		} else if s.next != nil {
			nr = s.next.spans[0]
			s.next.since = time.Now()
			s.next = nil
		} else {
			return 0, false, false
		}
		s.retired += r.size
		s.publish(nr)
	}
}

// nextIDSlow is nextID past the local path: n, the add's result on r, is the preload mark (the
// id is this caller's: it starts the refill) or lies past the end: then it takes an id under mu,
// else waits for the refill.
func (s *supply) nextIDSlow(ctx context.Context, r *span, n int64) (int64, error) {
	if n <= r.size {
		s.startRefill()
		return r.base + n, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var started time.Time
	var timer *time.Timer
	// A refusal counts only from a refill this call waited for, not one from before.
	waited := false
	for {
		s.mu.Lock()
		if s.client.closed.Load() {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		id, ok, refill := s.takeLocked()
		if ok {
			s.mu.Unlock()
			if refill {
				s.startRefill()
			}
			return id, nil
		}
		if s.strict {
			// Pass-through: this call's own request, sent after the call began.
			floor := s.floor
			s.mu.Unlock()
			return s.passThrough(ctx, floor)
		}
		if waited && s.refused != nil {
			err := copyFinal(s.refused)
			s.mu.Unlock()
			return 0, err
		}
		if !waited && s.batches.Load() > 0 {
			// Both batches spent while the callers took ids: the next request doubles.
			s.starved = true
		}
		// Taken under mu with the checks above: a refill ending after them still wakes us.
		wake := s.wake
		s.mu.Unlock()
		if timer == nil {
			started = time.Now()
			timer = time.NewTimer(s.client.cfg.WaitTimeout)
			defer timer.Stop()
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

// passThrough is a strict supply's call: one request for one id, sent now (after the call
// began), through the usual server order and failover; a refusal reaches the caller; failed
// rounds are retried with backoff within the wait timeout. The id is handed out only when above
// floor, the supply's floor read before the request was sent (see "Strict tags" above). The
// request runs on the client's context (Close ends it); ctx bounds the wait between rounds.
func (s *supply) passThrough(ctx context.Context, floor int64) (int64, error) {
	c := s.client
	started := time.Now()
	deadline := started.Add(c.cfg.WaitTimeout)
	failures := 0
	for {
		if c.closed.Load() {
			return 0, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		res := c.servers.fetch(c.stop, s.req, 1)
		var wait time.Duration
		switch {
		case res.runs != nil:
			var got int64
			for _, r := range res.runs {
				got += r.last - r.first + 1
			}
			s.received.Add(uint64(got))
			s.batches.Add(1)
			id := res.runs[0].first
			s.mu.Lock()
			if id > floor {
				// One call, one id: any further id of the answer (never more than asked) is
				// dropped.
				s.discarded.Add(uint64(got - 1))
				if id > s.floor {
					s.floor = id
				}
				s.lastFault = nil
				s.passed.Add(1)
				s.mu.Unlock()
				return id, nil
			}
			s.discarded.Add(uint64(got))
			s.lastFault = &ServerFault{Server: res.server, Kind: FaultBehind,
				Detail: fmt.Sprintf("its id %d lies at or below an id handed out before (%d)", id, floor)}
			s.mu.Unlock()
		case res.rejected != nil:
			return 0, res.rejected
		default:
			s.mu.Lock()
			if res.fault != nil {
				s.lastFault = res.fault
			}
			s.mu.Unlock()
			failures++
			wait = c.servers.backoff(failures)
		}
		if c.closed.Load() {
			return 0, ErrClosed
		}
		if !time.Now().Add(wait).Before(deadline) {
			s.mu.Lock()
			last := s.lastFault
			s.mu.Unlock()
			return 0, &UnavailableError{Waited: time.Since(started), Last: last}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0, ctx.Err()
			case <-c.stop.Done():
				t.Stop()
				return 0, ErrClosed
			case <-t.C:
			}
		}
	}
}

// goStrictLocked (under mu) turns the supply to pass-through for good after an answer of got
// ids up to last marked strict: that answer's ids and every id held locally are dropped
// (counted in DiscardedIDs: never handed out, never reused by a server), an empty span is
// published (every later call takes the slow path, which sees strict), the floor rises to last.
func (s *supply) goStrictLocked(got, last int64) {
	r := s.load()
	held := r.size - r.served()
	if b := r.batch; b != nil {
		for _, later := range b.spans[r.index+1:] {
			held += later.size
		}
	}
	if s.next != nil {
		held += s.next.total
	}
	s.discarded.Add(uint64(got + held))
	s.retired += r.served()
	s.publish(&span{})
	s.next = nil
	if last > s.floor {
		s.floor = last
	}
	s.strict = true
}

// startRefill starts the refill goroutine unless one runs, the next batch is already there,
// the supply is strict (no id is fetched ahead of its call), or the client is closed.
func (s *supply) startRefill() {
	if s.req == nil || s.refilling.Swap(true) {
		return
	}
	s.mu.Lock()
	if s.next != nil || s.strict {
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

// sizeLocked (under mu) applies the demand rule to the batch in use and returns the size of the
// request about to be sent.
func (s *supply) sizeLocked(now time.Time) int {
	r := s.load()
	var used, total int64
	var elapsed time.Duration
	if b := r.batch; b != nil {
		used, total, elapsed = b.used(r), b.total, now.Sub(b.since)
	}
	s.size = nextBatchSize(s.size, s.minSize, s.maxSize, used, total, elapsed, s.client.cfg.TargetLifetime, s.starved)
	s.starved = false
	return s.size
}

// nextBatchSize is the demand rule (PROTOCOL.md, "The batch a client asks for"): from the batch
// in use, used of its total ids handed out in elapsed since it became current, its projected
// lifetime is elapsed*total/used (used at least 1, elapsed at least 1 ms). Below half the
// target, or when a caller starved, the size doubles; above twice the target it halves; always
// within min..=max. With no batch in use (total 0) only starvation changes it.
func nextBatchSize(size, min, max int, used, total int64, elapsed, target time.Duration, starved bool) int {
	switch {
	case starved:
		size *= 2
	case total > 0:
		if used < 1 {
			used = 1
		}
		if elapsed < time.Millisecond {
			elapsed = time.Millisecond
		}
		// In float: elapsed*total overflows int64 for a long-idle batch of a million ids.
		lifetime := float64(elapsed) * float64(total) / float64(used)
		if lifetime < float64(target)/2 {
			size *= 2
		} else if lifetime > float64(target)*2 {
			size /= 2
		}
	}
	if size > max {
		size = max
	}
	if size < min {
		size = min
	}
	return size
}

// refill fetches one batch above the floor into next, retrying failed rounds with backoff for
// at most the wait timeout (then the next caller that needs a batch starts another).
func (s *supply) refill(ctx context.Context) {
	c := s.client
	deadline := time.Now().Add(c.cfg.WaitTimeout)
	failures := 0
	filled := false
	s.mu.Lock()
	size := s.sizeLocked(time.Now())
	s.mu.Unlock()
	count := size
	for ctx.Err() == nil {
		res := c.servers.fetch(ctx, s.req, count)
		var wait time.Duration
		if res.runs != nil {
			runs := res.runs
			var got int64
			for _, r := range runs {
				got += r.last - r.first + 1
			}
			s.received.Add(uint64(got))
			last := runs[len(runs)-1].last
			s.mu.Lock()
			if res.strict {
				s.goStrictLocked(got, last)
				s.mu.Unlock()
				break
			}
			floor := s.floor
			// Runs increase: the ids at or below the floor are a prefix (a part of a run too).
			cut := int64(0)
			for len(runs) > 0 && runs[0].first <= floor {
				if runs[0].last <= floor {
					cut += runs[0].last - runs[0].first + 1
					runs = runs[1:]
				} else {
					cut += floor - runs[0].first + 1
					runs[0].first = floor + 1
				}
			}
			s.discarded.Add(uint64(cut))
			if len(runs) > 0 {
				s.floor = last
				s.next = newBatch(runs)
				s.lastFault = nil
				s.batches.Add(1)
				filled = true
			} else {
				s.lastFault = &ServerFault{Server: res.server, Kind: FaultBehind,
					Detail: fmt.Sprintf("%d ids up to %d, none above %d", cut, last, floor)}
			}
			s.mu.Unlock()
			if filled {
				break
			}
			// Nothing above the floor: this server is behind the one used before (a lower
			// segment, or snowflake ids of older ticks): the catch-up asks at once for enough
			// ids to pass the floor. The deadline still bounds the loop.
			s.behindRounds.Add(1)
			count = catchUpCount(floor, last, size, s.req.limit)
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
// enough ids to pass the floor: those from the answer's last id up to the floor, plus the
// current batch size, at most limit (the route's). A segment server advances only as its ids
// are taken and its next ids follow its last ones, so a gap within one request is passed in one
// step; a larger one takes one request of limit ids per limit ids of gap, each discarded
// (counted in DiscardedIDs). It does not change the supply's size.
func catchUpCount(floor, last int64, size, limit int) int {
	gap := uint64(floor - last) // floor >= last > 0: no overflow
	if gap >= uint64(limit) || int(gap)+size >= limit {
		return limit
	}
	return int(gap) + size
}

// wantsNext: no next batch, and the current one is past its preload mark.
func (s *supply) wantsNext() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.load()
	b := r.batch
	return s.next == nil && b != nil && b.used(r) > b.total/10
}

// close puts an empty span in place: every later call takes the slow path, which sees closed.
func (s *supply) close() {
	s.mu.Lock()
	r := s.load()
	s.retired += r.served()
	s.publish(&span{})
	s.mu.Unlock()
}

// remaining counts the ids still held locally (current and next batches).
func (s *supply) remaining() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.load()
	n := r.size - r.served()
	if b := r.batch; b != nil {
		for _, later := range b.spans[r.index+1:] {
			n += later.size
		}
	}
	if s.next != nil {
		n += s.next.total
	}
	return n
}

// stats adds this supply's counters to st.
func (s *supply) stats(st *Stats) {
	s.mu.Lock()
	served := s.retired + s.load().served() + s.passed.Load()
	size := s.size
	s.mu.Unlock()
	st.IDsServed += uint64(served)
	st.Batches += s.batches.Load()
	st.IDsReceived += s.received.Load()
	st.DiscardedIDs += s.discarded.Load()
	if size > st.BatchSize {
		st.BatchSize = size
	}
}
