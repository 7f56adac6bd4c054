package leafid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// MaxFormattedBatch is the most texts one request of a formatted supply asks for (the list
// route's limit): a formatted supply never asks for more, whatever Config.MaxBatch says.
const MaxFormattedBatch = 100000

// FormattedSupply is the id stream of one formatted tag (docs/shapes.md: order numbers such as
// 20261127000123 that restart each day in a named zone), from Client.Formatted. Its ids are the
// server's texts, as received. Every FormattedSupply of one tag from one client shares the same
// stream.
type FormattedSupply struct {
	s *formattedSupply
}

// NextID returns the supply's next text (see Client.NextFormatted).
func (f *FormattedSupply) NextID(ctx context.Context) (string, error) {
	return f.s.nextID(ctx)
}

// TryNextID returns a text if a local batch holds one whose period has not ended, else false at
// once: it never waits, never sends a request itself and never fails (false also after Close).
func (f *FormattedSupply) TryNextID() (string, bool) {
	return f.s.tryNextID()
}

// NextFormatted returns the next text of the formatted tag tag: from the local batch, or after
// waiting (at most the wait timeout, and as long as ctx allows) for the next one. Errors:
// *InvalidTagError, *RejectedError (code not_formatted for a plain tag, sequence_exhausted when
// the period ran out of width, unknown_biz_tag...), *UnavailableError, ctx.Err(), ErrClosed.
func (c *Client) NextFormatted(ctx context.Context, tag string) (string, error) {
	if s := (*c.formatted.Load())[tag]; s != nil {
		return s.nextID(ctx)
	}
	f, err := c.Formatted(tag)
	if err != nil {
		return "", err
	}
	return f.NextID(ctx)
}

// Formatted returns the formatted supply of tag (the same stream on every call for that tag), or
// an *InvalidTagError. No request is sent until its first NextID.
func (c *Client) Formatted(tag string) (*FormattedSupply, error) {
	if s := (*c.formatted.Load())[tag]; s != nil {
		return &FormattedSupply{s}, nil
	}
	if !ValidTag(tag) {
		return nil, &InvalidTagError{Tag: tag}
	}
	c.newSegment.Lock()
	defer c.newSegment.Unlock()
	old := *c.formatted.Load()
	if s := old[tag]; s != nil {
		return &FormattedSupply{s}, nil
	}
	s := newFormattedSupply(c, &request{route: "/api/v1/segment/" + tag + "/ids", tag: tag,
		limit: MaxFormattedBatch, formatted: true},
		minInt(c.cfg.Batch, MaxFormattedBatch), minInt(c.cfg.MaxBatch, MaxFormattedBatch))
	m := make(map[string]*formattedSupply, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[tag] = s
	c.formatted.Store(&m)
	return &FormattedSupply{s}, nil
}

// textBatch is the texts of one accepted 200 answer, cut to those above the floor (an ordered
// answer) or whole (an unordered one), and the end of their period. Only taken changes; every other field is written before the batch is
// published and only read after.
type textBatch struct {
	// taken counts the adds: the caller whose add returns n owns texts[n-1] if n <= size. Set
	// to dropped when the batch is dropped for its period, so no later add owns a text.
	taken atomic.Int64
	// texts increase as byte strings (an ordered answer) or are as received (unordered).
	texts []string
	// size is len(texts) (0 for the empty batch a supply starts with and the one Close or a
	// drop puts in place: every call on it takes the slow path).
	size int64
	// preload is the n whose taker starts the refill of the next batch (10% of the batch).
	preload int64
	// periodEnd is the answer's period_end: from then on, none of texts is handed out.
	periodEnd time.Time
	// ended is set once the batch's period has ended by the default clock: by the timer armed
	// at receipt (armDeadline), on the runtime's monotonic clock. Never nil. The local path
	// reads this flag instead of the wall clock (see formattedSupply's comment).
	ended *atomic.Bool
	// deadline is the timer that sets ended (nil with an injected Config.Clock, and for the
	// empty batch); stopped when the batch is retired, so a retired batch's timer holds nothing.
	deadline *time.Timer
	// since is when the batch became current (under the supply's mu), for the demand rule.
	since time.Time
	// _ keeps the next allocation off taken's cache line.
	_ [64]byte
}

// dropped is what a dropped batch's counter is set to: every later add returns more than size.
const dropped = math.MaxInt64 / 2

// served is how many of the batch's texts were taken by callers (handed out, or owned and then
// found to be of an ended period: counted in formattedSupply.lost).
func (b *textBatch) served() int64 {
	if t := b.taken.Load(); t < b.size {
		return t
	}
	return b.size
}

// formattedSupply is one formatted tag's local stream: the current batch of texts and at most
// one next one, each with its period's end, as the numeric supply's double buffer.
//
// The local path (nextID) is one atomic add on the current batch's counter, one compare with
// its size and the period check: no lock, no allocation, and with the default clock no clock
// read (a clock read is a system call on a VM whose vDSO falls back to it: about 110 ns for
// clock_gettime on the bench machine, 190 ns for time.Now, against 4 ns for the whole numeric
// path). The period check, with the default clock, is one load of the batch's ended flag: a
// timer armed at receipt for period_end - time.Now() on the runtime's monotonic clock sets it
// (armDeadline); with an injected Config.Clock it is that clock read per text, compared with
// period_end, as before (tests move a period's end with it). Why it keeps the rules:
//   - No text twice: each add returns a distinct n and only n <= size owns a text, so no text
//     of one batch is handed out twice, and a batch is handed out from only while it is current.
//     Every accepted ordered batch is cut to the texts above the floor (the largest text
//     accepted before), so ordered batches are disjoint and increase. An unordered batch (a
//     permuted tag's answer, "ordered": false) is taken whole: its texts are distinct from every
//     other answer's because the server never issues a sequence twice, as for every id; the
//     client has no order to check them by.
//   - Increasing across callers (ordered batches): as for the numeric supply (supply's
//     comment): a batch is replaced only under mu, once spent or dropped, and every later batch
//     lies above it. A drop swaps the counter to dropped first, so no add after it owns a text
//     of the old batch. Unordered texts are handed out in the order received, each to one
//     caller; no order across callers is promised.
//   - Never a text of an ended period (both kinds): the owner of a text checks the period
//     (live) right before it returns it; a text of an ended period is discarded, and the batch
//     dropped whole under mu (its texts not yet owned are counted in discarded too). The
//     default clock's bound: the timer fires at the monotonic instant receipt + (period_end -
//     wall clock at receipt), late by at most the runtime's timer latency (microseconds to a
//     few milliseconds under load); after the store every later load sees ended (atomic), so a
//     text is handed out at most that latency after period_end by the wall clock as it ran at
//     receipt. A wall clock stepped forward by D after receipt is not seen by the timer: texts
//     may then be handed out up to D (plus the latency) after period_end by the stepped clock,
//     until the next slow-path call (the preload mark, a batch switch: liveSlow reads the wall
//     clock too) or the next answer (each answer's deadline is computed from the wall clock
//     read at its receipt). A clock stepped back only makes the flag fire early (texts dropped,
//     never handed out late). The server never hands out texts of an ended period (its own
//     clock decides the period of every text it issues); this check is the client's second
//     guard, for texts held across the period's end.
type formattedSupply struct {
	// current is the *textBatch being served: replaced only under mu.
	current unsafe.Pointer
	_       [56]byte
	// now is the client's Config.Clock, nil for time.Now (called directly: no indirect call on
	// the local path with the default clock).
	now func() time.Time
	// client owns the servers, the settings and the background goroutines.
	client *Client
	// req is the list request of the tag (nil for a fixed supply of the benchmarks, which never
	// fetches).
	req *request
	// refilling is true while one refill goroutine runs (single flight).
	refilling atomic.Bool

	// mu guards the fields below; held for a few instructions, never across a request.
	mu sync.Mutex
	// next is the batch to serve after current's, once fetched.
	next *textBatch
	// floor is the largest text accepted into an ordered batch so far (hasFloor false before the
	// first); unordered batches neither meet nor move it.
	floor    string
	hasFloor bool
	// refused is the refusal of the last refill; waiting callers return it.
	refused error
	// lastFault is the last server failure of the refills, for UnavailableError.
	lastFault *ServerFault
	// wake is closed (and replaced) when a refill ends.
	wake chan struct{}
	// retired counts the texts of batches replaced (taken by callers).
	retired int64
	// size is the texts the next request asks for (nextBatchSize), within minSize..=maxSize.
	size, minSize, maxSize int
	// starved is set by a caller that had to wait because both batches were spent.
	starved bool

	batches   atomic.Uint64
	received  atomic.Uint64
	discarded atomic.Uint64
	// lost counts texts taken by a caller (in served) that were not handed out: their period
	// had ended.
	lost atomic.Uint64
}

// clock is the wall clock a batch's period_end is compared with.
func (s *formattedSupply) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// live is the local path's period check: with the default clock, b's ended flag (set by its
// deadline timer, no clock read); with an injected Config.Clock, that clock before period_end.
func (s *formattedSupply) live(b *textBatch) bool {
	if s.now == nil {
		return !b.ended.Load()
	}
	return s.now().Before(b.periodEnd)
}

// liveSlow is the period check off the local path (the preload mark, under mu): live, and with
// the default clock also the wall clock before period_end, so a wall clock stepped forward
// after receipt is caught here (see formattedSupply's comment).
func (s *formattedSupply) liveSlow(b *textBatch) bool {
	return s.live(b) && s.clock().Before(b.periodEnd)
}

// armDeadline arms b's deadline timer: ended is set after d on the runtime's monotonic clock.
// The closure holds only the flag, and retire stops the timer, so no batch is kept alive by it.
func (b *textBatch) armDeadline(d time.Duration) {
	if b.deadline != nil {
		b.deadline.Stop()
	}
	ended := b.ended
	if d <= 0 {
		ended.Store(true)
		return
	}
	b.deadline = time.AfterFunc(d, func() { ended.Store(true) })
}

// retire stops b's deadline timer (b is no longer current).
func (b *textBatch) retire() {
	if b.deadline != nil {
		b.deadline.Stop()
	}
}

func (s *formattedSupply) load() *textBatch { return (*textBatch)(atomic.LoadPointer(&s.current)) }

func (s *formattedSupply) publish(b *textBatch) { atomic.StorePointer(&s.current, unsafe.Pointer(b)) }

func newFormattedSupply(c *Client, req *request, minSize, maxSize int) *formattedSupply {
	s := &formattedSupply{client: c, req: req, now: c.cfg.Clock, wake: make(chan struct{}), size: minSize,
		minSize: minSize, maxSize: maxSize}
	s.publish(emptyBatch())
	return s
}

// emptyBatch is the batch a supply starts with and the one a drop or Close puts in place.
func emptyBatch() *textBatch { return &textBatch{ended: new(atomic.Bool)} }

// newTextBatch builds a batch with the preload mark at 10% of it; with the default clock
// (s.now nil) its deadline timer is armed for periodEnd - time.Now() (the period rule).
func (s *formattedSupply) newTextBatch(texts []string, periodEnd time.Time) *textBatch {
	n := int64(len(texts))
	b := &textBatch{texts: texts, size: n, preload: n/10 + 1, periodEnd: periodEnd, ended: new(atomic.Bool)}
	if s.now == nil {
		b.armDeadline(time.Until(periodEnd))
	}
	return b
}

// nextID is the next text: the local path, else nextSlow. The local path is the default
// clock's (the ended flag, read here without a call: live was not inlined, issue 47); with an
// injected Config.Clock every text is settled by owned, which reads that clock.
func (s *formattedSupply) nextID(ctx context.Context) (string, error) {
	b := s.load()
	n := b.taken.Add(1)
	if n <= b.size && n != b.preload && s.now == nil && !b.ended.Load() {
		return b.texts[n-1], nil
	}
	return s.nextSlow(ctx, b, n)
}

// tryNextID is a text of the local batches if they hold one, else false (and the refill is
// started). Never waits.
func (s *formattedSupply) tryNextID() (string, bool) {
	b := s.load()
	n := b.taken.Add(1)
	if n <= b.size && n != b.preload && s.now == nil && !b.ended.Load() {
		return b.texts[n-1], true
	}
	if text, ok, done := s.owned(b, n); done {
		return text, ok
	}
	s.mu.Lock()
	if s.client.closed.Load() {
		s.mu.Unlock()
		return "", false
	}
	text, ok, refill := s.takeLocked()
	s.mu.Unlock()
	if refill || !ok {
		s.startRefill()
	}
	return text, ok
}

// owned settles n, an add's result on b past the local path: a text of a live period (the
// text is the caller's: done; the refill starts if n is the preload mark), a text of an ended
// period (discarded, the batch dropped; not done), or past the end (not done). With an injected
// Config.Clock every text comes here (the local path reads only the default clock's flag).
func (s *formattedSupply) owned(b *textBatch, n int64) (text string, ok, done bool) {
	if n > b.size {
		return "", false, false
	}
	if s.liveSlow(b) {
		if n == b.preload {
			s.startRefill()
		}
		return b.texts[n-1], true, true
	}
	s.lost.Add(1)
	s.discarded.Add(1)
	s.mu.Lock()
	if s.load() == b {
		s.dropLocked(b)
	}
	s.mu.Unlock()
	return "", false, false
}

// dropLocked (under mu) drops the current batch b, whose period has ended: no add after the swap
// owns a text of it, the texts nobody took count as discarded, and current moves to the next
// batch (or an empty one).
func (s *formattedSupply) dropLocked(b *textBatch) {
	took := b.taken.Swap(dropped)
	if took > b.size {
		took = b.size
	}
	s.retired += took
	s.discarded.Add(uint64(b.size - took))
	b.retire()
	if s.next != nil {
		s.next.since = time.Now()
		s.publish(s.next)
		s.next = nil
	} else {
		s.publish(emptyBatch())
	}
}

// takeLocked (under mu) takes a text, moving current on while it is spent or its period has
// ended; ok is false when no local text is left. refill says the caller took the preload mark.
func (s *formattedSupply) takeLocked() (text string, ok, refill bool) {
	for {
		b := s.load()
		if n := b.taken.Add(1); n <= b.size {
			if s.liveSlow(b) {
				return b.texts[n-1], true, n == b.preload
			}
			s.lost.Add(1)
			s.discarded.Add(1)
			s.dropLocked(b)
			continue
		}
		// b is spent (this add returned n > size): switching cannot lose a text.
		if s.next == nil {
			return "", false, false
		}
		if b.taken.Load() < dropped {
			s.retired += b.size
		}
		b.retire()
		s.next.since = time.Now()
		s.publish(s.next)
		s.next = nil
	}
}

// nextSlow is nextID past the local path: the preload mark, a text of an ended period, or past
// the end; then it takes a text under mu, else waits for the refill.
func (s *formattedSupply) nextSlow(ctx context.Context, b *textBatch, n int64) (string, error) {
	if text, _, done := s.owned(b, n); done {
		return text, nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var started time.Time
	var timer *time.Timer
	waited := false
	for {
		s.mu.Lock()
		if s.client.closed.Load() {
			s.mu.Unlock()
			return "", ErrClosed
		}
		text, ok, refill := s.takeLocked()
		if ok {
			s.mu.Unlock()
			if refill {
				s.startRefill()
			}
			return text, nil
		}
		if waited && s.refused != nil {
			err := copyFinal(s.refused)
			s.mu.Unlock()
			return "", err
		}
		if !waited && s.batches.Load() > 0 {
			s.starved = true
		}
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
			return "", &UnavailableError{Waited: time.Since(started), Last: last}
		case <-ctx.Done():
			return "", ctx.Err()
		case <-s.client.stop.Done():
			return "", ErrClosed
		}
	}
}

// startRefill starts the refill goroutine unless one runs, the next batch is there, or the
// client is closed.
func (s *formattedSupply) startRefill() {
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

// sizeLocked (under mu) applies the demand rule (nextBatchSize) to the batch in use.
func (s *formattedSupply) sizeLocked(now time.Time) int {
	b := s.load()
	var used, total int64
	var elapsed time.Duration
	if b.size > 0 && b.taken.Load() < dropped {
		used, total, elapsed = b.served(), b.size, now.Sub(b.since)
	}
	s.size = nextBatchSize(s.size, s.minSize, s.maxSize, used, total, elapsed, s.client.cfg.TargetLifetime, s.starved)
	s.starved = false
	return s.size
}

// refill fetches one batch of texts above the floor into next, through the client's servers
// (failover, backoff), retrying failed rounds for at most the wait timeout.
func (s *formattedSupply) refill(ctx context.Context) {
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
		if res.texts != nil {
			texts := res.texts
			s.received.Add(uint64(len(texts)))
			last := texts[len(texts)-1]
			s.mu.Lock()
			// Texts increase: those at or below the floor are a prefix. An unordered answer (a
			// permuted tag) has no order to keep and no floor: taken whole, as received, and
			// the floor left alone (uniqueness is the server's, as for every id).
			cut := 0
			if s.hasFloor && !res.unordered {
				for cut < len(texts) && texts[cut] <= s.floor {
					cut++
				}
			}
			s.discarded.Add(uint64(cut))
			if cut < len(texts) {
				if !res.unordered {
					s.floor, s.hasFloor = last, true
				}
				s.next = s.newTextBatch(texts[cut:], res.periodEnd)
				s.lastFault = nil
				s.batches.Add(1)
				filled = true
			} else {
				s.lastFault = &ServerFault{Server: res.server, Kind: FaultBehind,
					Detail: fmt.Sprintf("%d texts up to %q, none above %q", cut, last, s.floor)}
			}
			s.mu.Unlock()
			if filled {
				break
			}
			// Nothing above the floor: this server is behind the one used before. The catch-up
			// (PROTOCOL.md): a gap between texts cannot be sized, so the next request follows
			// at once and asks for twice the current size, at most the route's limit; the
			// size itself is left alone. The deadline still bounds the loop.
			count = minInt(2*size, s.req.limit)
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
	if filled && s.wantsNext() {
		s.startRefill()
	}
}

// wantsNext: no next batch, and the current one is past its preload mark.
func (s *formattedSupply) wantsNext() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.load()
	return s.next == nil && b.size > 0 && b.served() >= b.preload
}

// close puts an empty batch in place: every later call takes the slow path, which sees closed.
func (s *formattedSupply) close() {
	s.mu.Lock()
	b := s.load()
	if b.taken.Load() < dropped {
		s.retired += b.served()
	}
	b.retire()
	s.publish(emptyBatch())
	s.mu.Unlock()
}

// stats adds this supply's counters to st.
func (s *formattedSupply) stats(st *Stats) {
	s.mu.Lock()
	served := s.retired
	if b := s.load(); b.taken.Load() < dropped {
		served += b.served()
	}
	size := s.size
	s.mu.Unlock()
	st.IDsServed += uint64(served) - s.lost.Load()
	st.Batches += s.batches.Load()
	st.IDsReceived += s.received.Load()
	st.DiscardedIDs += s.discarded.Load()
	if size > st.BatchSize {
		st.BatchSize = size
	}
}

// formattedBody is the 200 body of the list route: ids are read raw, so numbers (a plain tag's
// ids) are told from texts.
type formattedBody struct {
	BizTag    *string           `json:"biz_tag"`
	IDs       []json.RawMessage `json:"ids"`
	PeriodEnd *string           `json:"period_end"`
	// Ordered is false for a permuted tag's answers (texts in no order); absent means true.
	Ordered *bool `json:"ordered"`
}

// parsedTexts is a valid body of the list route.
type parsedTexts struct {
	texts     []string
	periodEnd time.Time
	// unordered: the body said "ordered": false; texts were not checked for byte order.
	unordered bool
}

// parseFormatted reads a 200 body of the list route as a batch of texts. It is one only if it
// names the tag asked, ids is a non-empty list of non-empty strings, no longer than asked,
// increasing as byte strings (unless the body says "ordered": false: a permuted tag's texts come
// in no order), and period_end is an RFC 3339 instant. A body of numeric ids without period_end
// is a plain tag's (notFormatted). Anything else is the server's fault.
func parseFormatted(body []byte, wantTag string, asked int) (got parsedTexts, notFormatted bool, err error) {
	var b formattedBody
	if err := json.Unmarshal(body, &b); err != nil {
		return got, false, fmt.Errorf("not an ids body: %v", err)
	}
	if b.BizTag == nil {
		return got, false, errors.New("no biz_tag in the body")
	}
	if *b.BizTag != wantTag {
		return got, false, fmt.Errorf("asked for tag %q, got %q", wantTag, *b.BizTag)
	}
	if len(b.IDs) == 0 {
		return got, false, errors.New("no ids in the body")
	}
	if b.PeriodEnd == nil {
		numeric := true
		for _, raw := range b.IDs {
			raw = bytes.TrimSpace(raw)
			if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
				numeric = false
				break
			}
		}
		if numeric {
			return got, true, nil
		}
		return got, false, errors.New("no period_end in the body")
	}
	end, err := parseRFC3339(*b.PeriodEnd)
	if err != nil {
		return got, false, fmt.Errorf("period_end %q is not an RFC 3339 instant", *b.PeriodEnd)
	}
	if len(b.IDs) > asked {
		return got, false, fmt.Errorf("%d ids for %d asked", len(b.IDs), asked)
	}
	unordered := b.Ordered != nil && !*b.Ordered
	texts := make([]string, len(b.IDs))
	// Unordered texts have no order to check: a text twice is caught by this set instead.
	var seen map[string]bool
	if unordered {
		seen = make(map[string]bool, len(b.IDs))
	}
	for i, raw := range b.IDs {
		if err := json.Unmarshal(raw, &texts[i]); err != nil {
			return got, false, fmt.Errorf("id %s is not a string", string(raw))
		}
		if texts[i] == "" {
			return got, false, errors.New("an empty id")
		}
		if !unordered && i > 0 && texts[i] <= texts[i-1] {
			return got, false, fmt.Errorf("id %q does not lie above %q", texts[i], texts[i-1])
		}
		if unordered {
			if seen[texts[i]] {
				return got, false, fmt.Errorf("id %q twice", texts[i])
			}
			seen[texts[i]] = true
		}
	}
	return parsedTexts{texts: texts, periodEnd: end, unordered: unordered}, false, nil
}

// rfc3339 is the subset of RFC 3339 the server writes (clients/conformance/vectors/rfc3339.json):
// upper-case T and Z, a fraction with a dot, offsets as +HH:MM or -HH:MM.
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)

// parseRFC3339 reads an instant in that subset (time.Parse alone also takes a comma for the
// fraction's dot, and offsets past 23 hours).
func parseRFC3339(text string) (time.Time, error) {
	if !rfc3339.MatchString(text) {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 instant", text)
	}
	return time.Parse(time.RFC3339Nano, text)
}
