package leafid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBodyBytes bounds a response body read: a range body holds one run per segment crossed (a
// million ids of a tag of step 1 would be a single run; 1000 runs of 19-digit ids fit in 60 kB).
const maxBodyBytes = 8 << 20

// servers is the server list of one client: which server a batch is asked from, failover,
// backoff and health probes.
//
// A batch goes to the preferred server (the last one that delivered; the first one given at
// start). A server that fails is marked down and the next up server is asked at once, in the
// same call. A down server is asked again only after a 200 from its /health/ready (the health
// loop probes it with exponential backoff), or as a last resort when every server is down, so a
// client never stalls behind a probe schedule while some server could answer.
type servers struct {
	// list holds the servers in the order given to New.
	list []*server
	// preferred is the index of the server asked first: a hint only (any index is a correct
	// place to start; a stale one costs at most one failed request).
	preferred atomic.Int64
	// http is one connection pool for every server, owned by the client (closed by Close).
	http *http.Client
	// requestTimeout bounds one batch request or probe, connect to last byte.
	requestTimeout time.Duration
	// backoffMin is the first wait after a failure (before the first probe, between two failed
	// fetch rounds of a refill).
	backoffMin time.Duration
	// backoffMax is the longest wait between two probes of a down server.
	backoffMax time.Duration
	// failovers counts requests that went to another server because the one asked failed.
	failovers atomic.Uint64
	// authorization is "Bearer <token>" sent on every batch and bounds request (never on the
	// health probe), or nil without a token. A pointer, so that printing the client with %+v
	// shows an address, never the token.
	authorization *string
	// wait bounds the waits for 429 quota_exhausted in one call (the client's wait timeout): a
	// Retry-After ending past it reaches the caller as a *ThrottledError.
	wait time.Duration
	// wentDown wakes the health loop when a server is marked down (buffered: one pending wake
	// is enough, the loop rereads every server).
	wentDown chan struct{}
}

// server is one server and its health.
type server struct {
	// base is the URL without a trailing slash.
	base string
	// mu guards the fields below; held for a few instructions, never across a request.
	mu sync.Mutex
	// down is set by a failed request or probe, cleared only by a 200 (a probe's or a request's)
	// to a request sent after the last failure.
	down bool
	// downs counts the times it was marked down: a 200 to a request sent before the latest
	// failure (an answer in flight when the server was killed) is older news than that failure
	// and does not mark it up.
	downs uint64
	// failures counts failures in a row; the probe backoff doubles with each.
	failures int
	// nextProbe is when a down server is probed next.
	nextProbe time.Time
}

// request is one supply's range request and what its answer must look like.
type request struct {
	// route is the path, e.g. /api/v1/segment/orders/ranges (the tag is valid, so nothing to
	// escape).
	route string
	// tag is the tag the body must name (segment route); empty for snowflake.
	tag string
	// limit is the most ids the route gives per request (MaxBatch, MaxSnowflakeBatch,
	// MaxFormattedBatch).
	limit int
	// formatted: the list route of a formatted tag (texts and period_end, parseFormatted)
	// rather than a range route.
	formatted bool
}

// idRun is one run of consecutive ids of a body, both ends included: 0 < first <= last.
type idRun struct {
	first, last int64
}

// fetchResult is the outcome of one fetch: the runs of a valid body, or a refusal, or every
// server failed.
type fetchResult struct {
	// runs of a valid 200 body, increasing, not overlapping.
	runs []idRun
	// strict: the range body said "strict": true (issue 45): the tag is strict, its supply
	// turns to pass-through (supply.goStrictLocked).
	strict bool
	// texts and periodEnd are a valid formatted body (request.formatted).
	texts     []string
	periodEnd time.Time
	// unordered: the formatted body said "ordered": false (a permuted tag).
	unordered bool
	// server is the base URL of the server that sent runs or texts.
	server string
	// rejected is set when a server refused the request itself (a *RejectedError), or the caller
	// token's quota is spent past the wait timeout (a *ThrottledError): final.
	rejected error
	// fault is the last server failure when no server delivered (nil if none could be asked).
	fault *ServerFault
}

// finalCodes are the 4xx refusals of the request itself: every server shares the database and
// the layout and would answer the same, so they reach the caller and are no failover.
var finalCodes = map[string]bool{
	"unknown_biz_tag":   true,
	"invalid_biz_tag":   true,
	"biz_tag_exhausted": true,
	"invalid_count":     true,
	"invalid_request":   true,
	// A numeric supply asked for a formatted tag (the range route refuses it).
	"formatted_tag": true,
	// The bounds route: an empty range, one before the layout's epoch or past its end.
	"invalid_time_range": true,
}

// refusalIsFinal reports whether an error answer holds on every server (it reaches the caller)
// or is only this server's (ask the next): a 4xx whose code is in finalCodes, or a 503
// sequence_exhausted (a formatted tag's period ran out of width until the next period).
// clients/conformance/vectors/errors.json.
func refusalIsFinal(status int, code string) bool {
	switch {
	// The caller token refused by leafid itself: every server reads the same tokens.
	case status == http.StatusUnauthorized:
		return code == "unauthorized"
	case status == http.StatusForbidden:
		return code == "forbidden"
	case status >= 400 && status < 500:
		return finalCodes[code]
	case status == http.StatusServiceUnavailable:
		return code == "sequence_exhausted"
	}
	return false
}

// isQuotaWait reports whether an error answer is leafid's 429 quota_exhausted: the caller token's
// quota is spent on every server (they share it), so the client waits Retry-After and asks the
// same server again; a proxy's 429 (rate_limited, or no code) is a failover.
// clients/conformance/vectors/errors.json (action "wait").
func isQuotaWait(status int, code string) bool {
	return status == http.StatusTooManyRequests && code == "quota_exhausted"
}

// retryAfter reads a Retry-After of whole seconds (leafid sends an integer >= 1): 1 s when absent
// or unreadable, so that a quota wait is never zero (no busy loop).
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(h.Get("Retry-After")), 10, 64)
	if err != nil || n < 1 {
		n = 1
	}
	if n > 1<<31 {
		n = 1 << 31
	}
	return time.Duration(n) * time.Second
}

func newServers(bases []string, httpClient *http.Client, requestTimeout, backoffMin, backoffMax time.Duration) *servers {
	s := &servers{
		http:           httpClient,
		requestTimeout: requestTimeout,
		backoffMin:     backoffMin,
		backoffMax:     backoffMax,
		wentDown:       make(chan struct{}, 1),
	}
	for _, b := range bases {
		s.list = append(s.list, &server{base: b})
	}
	return s
}

// fetch asks for one batch of count ids: the preferred server first, then the other up servers
// in order, then (last resort) the down ones (call). It stops at the first valid batch or the
// first refusal of the request itself.
func (s *servers) fetch(ctx context.Context, req *request, count int) fetchResult {
	var got fetchResult
	srv, rejected, fault := s.call(ctx, func(ctx context.Context, srv *server) (error, *ServerFault) {
		var rejected error
		var fault *ServerFault
		got, rejected, fault = s.ask(ctx, srv, req, count)
		return rejected, fault
	})
	switch {
	case srv != nil:
		got.server = srv.base
		return got
	case rejected != nil:
		return fetchResult{rejected: rejected}
	default:
		return fetchResult{fault: fault}
	}
}

// call sends one request, by ask, through the failover order: the preferred server first, then
// the other up servers in order, then (last resort) the down ones. ask reports a refusal of the
// request itself (final: no other server is asked), or that server's fault (it is marked down
// and the next one asked at once, a failover), or neither: that server answered. call returns
// the server that answered (nil if none did), the refusal, or the last fault (nil if no server
// could be asked). Batch requests (fetch) and the bounds helper share it, so both fail over
// alike.
func (s *servers) call(ctx context.Context, ask func(ctx context.Context, srv *server) (error, *ServerFault)) (*server, error, *ServerFault) {
	n := len(s.list)
	// A wait for 429 quota_exhausted ends by this instant or not at all.
	deadline := time.Now().Add(s.wait)
	start := int(s.preferred.Load()) % n
	tried := make([]bool, n)
	var last *ServerFault
	for _, lastResort := range [2]bool{false, true} {
		for k := 0; k < n; k++ {
			i := (start + k) % n
			if tried[i] || (!lastResort && s.list[i].isDown()) {
				continue
			}
			if ctx.Err() != nil {
				return nil, nil, last
			}
			if last != nil {
				// The server asked before this one failed: this request fails over.
				s.failovers.Add(1)
			}
			tried[i] = true
			seen := s.list[i].downCount()
			rejected, fault := ask(ctx, s.list[i])
			// 429 quota_exhausted: the same server again after its Retry-After, never another
			// (every server shares the quota) and no failover counted; a wait that would end past
			// the deadline is the caller's *ThrottledError. Bounded: each round sleeps at least
			// 1 s and the deadline ends the loop.
			for {
				var th *ThrottledError
				if !errors.As(rejected, &th) {
					break
				}
				s.preferred.Store(int64(i))
				if time.Now().Add(th.RetryAfter).After(deadline) {
					return nil, rejected, nil
				}
				t := time.NewTimer(th.RetryAfter)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, nil, last
				case <-t.C:
				}
				rejected, fault = ask(ctx, s.list[i])
			}
			switch {
			case fault != nil:
				if ctx.Err() != nil {
					// Closing, not the server's fault.
					return nil, nil, last
				}
				s.markDown(s.list[i])
				last = fault
			case rejected != nil:
				return nil, rejected, nil
			default:
				if s.list[i].markUpUnlessDownSince(seen) {
					s.preferred.Store(int64(i))
				}
				return s.list[i], nil, nil
			}
		}
	}
	return nil, nil, last
}

// rangesBody is the 200 body of both range routes (biz_tag only on the segment one). The ids
// are decimal strings (asked with stringify_ids=true), parsed exactly as int64.
type rangesBody struct {
	BizTag *string       `json:"biz_tag"`
	Count  *int64        `json:"count"`
	Ranges []rangeOfBody `json:"ranges"`
	// Strict is "strict": true on a strict tag's answers (absent for other tags). Only a JSON
	// true counts (as in the other clients); anything else reads as not strict.
	Strict json.RawMessage `json:"strict"`
}

// rangeOfBody is one run of a body, both ends included.
type rangeOfBody struct {
	First *string `json:"first"`
	Last  *string `json:"last"`
}

// errorBody is the server's error body, read leniently.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ask sends one batch request for count ids to one server: the runs (or texts) of a valid body,
// or a refusal, or that server's fault.
func (s *servers) ask(ctx context.Context, srv *server, req *request, count int) (fetchResult, error, *ServerFault) {
	var none fetchResult
	url := srv.base + req.route + "?count=" + strconv.Itoa(count)
	if !req.formatted {
		url += "&stringify_ids=true"
	}
	body, rejected, fault := s.get(ctx, srv, url)
	if rejected != nil || fault != nil {
		return none, rejected, fault
	}
	if req.formatted {
		b, notFormatted, err := parseFormatted(body, req.tag, count)
		if notFormatted {
			return none, &RejectedError{Server: srv.base, Status: http.StatusOK, Code: "not_formatted",
				Message: fmt.Sprintf("biz_tag %q is not formatted: its ids are numbers (use NextID)", req.tag)}, nil
		}
		if err != nil {
			return none, nil, srv.fault(FaultBadResponse, 0, "", err.Error())
		}
		return fetchResult{texts: b.texts, periodEnd: b.periodEnd, unordered: b.unordered}, nil, nil
	}
	runs, strict, err := parseRangesBody(body, req.tag, count)
	if err != nil {
		return none, nil, srv.fault(FaultBadResponse, 0, "", err.Error())
	}
	return fetchResult{runs: runs, strict: strict}, nil, nil
}

// get sends GET url to srv, bounded by the request timeout, and sorts the answer: the body of a
// 200 (at most maxBodyBytes); a refusal of the request itself (refusalIsFinal); or that
// server's fault (no answer, a 5xx, a 4xx with another code, a body too large).
func (s *servers) get(ctx context.Context, srv *server, url string) ([]byte, error, *ServerFault) {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, srv.fault(FaultTransport, 0, "", err.Error())
	}
	hreq.Header.Set("Accept", "application/json")
	if s.authorization != nil {
		hreq.Header.Set("Authorization", *s.authorization)
	}
	resp, err := s.http.Do(hreq)
	if err != nil {
		return nil, nil, srv.fault(FaultTransport, 0, "", err.Error())
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, nil, srv.fault(FaultTransport, 0, "", "reading the body: "+err.Error())
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		_ = json.Unmarshal(body, &eb)
		if refusalIsFinal(resp.StatusCode, eb.Code) {
			return nil, &RejectedError{Server: srv.base, Status: resp.StatusCode, Code: eb.Code, Message: eb.Message}, nil
		}
		if isQuotaWait(resp.StatusCode, eb.Code) {
			return nil, &ThrottledError{Server: srv.base, Status: resp.StatusCode, Code: eb.Code, Message: eb.Message,
				RetryAfter: retryAfter(resp.Header)}, nil
		}
		return nil, nil, srv.fault(FaultStatus, resp.StatusCode, eb.Code, "")
	}
	if len(body) > maxBodyBytes {
		return nil, nil, srv.fault(FaultBadResponse, 0, "", "body too large")
	}
	return body, nil, nil
}

// fault is a failure of srv.
func (srv *server) fault(kind FaultKind, status int, code, detail string) *ServerFault {
	return &ServerFault{Server: srv.base, Kind: kind, Status: status, Code: code, Detail: detail}
}

// parseID reads one end of a run: an exact int64 above 0, written as a JSON string of plain
// decimal digits without a leading zero (a JSON number is not the answer asked for).
func parseID(s *string) (int64, error) {
	if s == nil {
		return 0, errors.New("an id is missing or not a string")
	}
	text := *s
	if text == "" || text[0] < '1' || text[0] > '9' {
		return 0, fmt.Errorf("id %q is not a positive integer", text)
	}
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("id %q is not a positive 64-bit integer", text)
	}
	return id, nil
}

// parseRanges reads a 200 body as a batch of runs. It is one only if every run has
// 0 < first <= last <= 2^63-1, the runs increase and do not overlap, their sizes add up to the
// body's count, at least 1 and at most the count asked, and (segment) it names the tag asked.
// Anything else is the server's fault and none of its ids is used.
func parseRanges(body []byte, wantTag string, asked int) ([]idRun, error) {
	runs, _, err := parseRangesBody(body, wantTag, asked)
	return runs, err
}

// parseRangesBody is parseRanges that also says whether the body marked the tag strict.
func parseRangesBody(body []byte, wantTag string, asked int) ([]idRun, bool, error) {
	var b rangesBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, false, fmt.Errorf("not a ranges body: %v", err)
	}
	if wantTag != "" {
		if b.BizTag == nil {
			return nil, false, errors.New("no biz_tag in the body")
		}
		if *b.BizTag != wantTag {
			return nil, false, fmt.Errorf("asked for tag %q, got %q", wantTag, *b.BizTag)
		}
	}
	if b.Count == nil {
		return nil, false, errors.New("no count in the body")
	}
	count := *b.Count
	if count < 1 || count > int64(asked) {
		return nil, false, fmt.Errorf("count %d for %d ids asked", count, asked)
	}
	if len(b.Ranges) == 0 {
		return nil, false, errors.New("no ranges in the body")
	}
	runs := make([]idRun, len(b.Ranges))
	var sum int64
	for i, r := range b.Ranges {
		first, err := parseID(r.First)
		if err != nil {
			return nil, false, err
		}
		last, err := parseID(r.Last)
		if err != nil {
			return nil, false, err
		}
		if last < first {
			return nil, false, fmt.Errorf("run %d..%d ends before it starts", first, last)
		}
		if i > 0 && first <= runs[i-1].last {
			return nil, false, fmt.Errorf("run %d..%d does not lie above %d..%d", first, last, runs[i-1].first, runs[i-1].last)
		}
		// last-first < 2^63 and sum <= count before the add: no overflow.
		if last-first+1 > count-sum {
			return nil, false, fmt.Errorf("runs hold more ids than the count %d", count)
		}
		sum += last - first + 1
		runs[i] = idRun{first, last}
	}
	if sum != count {
		return nil, false, fmt.Errorf("runs hold %d ids, the count says %d", sum, count)
	}
	return runs, string(b.Strict) == "true", nil
}

// healthLoop probes each down server once its backoff has passed, until ctx is done. It sleeps
// until the earliest probe is due, or until a server goes down while none was; with every
// server up it does nothing. Probes due together run concurrently, and the next round waits for
// them.
func (s *servers) healthLoop(ctx context.Context) {
	for {
		var due <-chan time.Time
		var timer *time.Timer
		if at, ok := s.earliestProbe(); ok {
			timer = time.NewTimer(time.Until(at))
			due = timer.C
		}
		select {
		case <-ctx.Done():
		case <-s.wentDown:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		var wg sync.WaitGroup
		for _, srv := range s.list {
			if !srv.dueForProbe(now) {
				continue
			}
			wg.Add(1)
			go func(srv *server) {
				defer wg.Done()
				seen := srv.downCount()
				if s.probe(ctx, srv) {
					srv.markUpUnlessDownSince(seen)
				} else if ctx.Err() == nil {
					s.markDown(srv)
				}
			}(srv)
		}
		wg.Wait()
	}
}

// earliestProbe is when the next probe is due, if any server is down.
func (s *servers) earliestProbe() (time.Time, bool) {
	var at time.Time
	found := false
	for _, srv := range s.list {
		srv.mu.Lock()
		if srv.down && (!found || srv.nextProbe.Before(at)) {
			at, found = srv.nextProbe, true
		}
		srv.mu.Unlock()
	}
	return at, found
}

// markDown marks srv down (its next probe after the backoff of its failures in a row) and wakes
// the health loop.
func (s *servers) markDown(srv *server) {
	srv.mu.Lock()
	srv.down = true
	srv.downs++
	srv.failures++
	srv.nextProbe = time.Now().Add(s.backoff(srv.failures))
	srv.mu.Unlock()
	select {
	case s.wentDown <- struct{}{}:
	default:
	}
}

// probe reports whether srv answers 200 on /health/ready within the request timeout.
func (s *servers) probe(ctx context.Context, srv *server) bool {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.base+"/health/ready", nil)
	if err != nil {
		return false
	}
	resp, err := s.http.Do(hreq)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// backoff is the wait after failures failures in a row (at least 1): backoffMin doubling, at
// most backoffMax.
func (s *servers) backoff(failures int) time.Duration {
	d := s.backoffMin
	for i := 1; i < failures && d < s.backoffMax; i++ {
		d *= 2
	}
	if d > s.backoffMax {
		d = s.backoffMax
	}
	return d
}

// downList gives the base URLs of the servers marked down.
func (s *servers) downList() []string {
	var out []string
	for _, srv := range s.list {
		if srv.isDown() {
			out = append(out, srv.base)
		}
	}
	return out
}

func (srv *server) isDown() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.down
}

func (srv *server) dueForProbe(now time.Time) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.down && !now.Before(srv.nextProbe)
}

// downCount is how many times srv was marked down (read before a request is sent).
func (srv *server) downCount() uint64 {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.downs
}

// markUpUnlessDownSince marks srv up after a 200, unless it was marked down since seen (its
// downCount when that request was sent); it reports whether it did.
func (srv *server) markUpUnlessDownSince(seen uint64) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.downs != seen {
		return false
	}
	srv.down = false
	srv.failures = 0
	return true
}
