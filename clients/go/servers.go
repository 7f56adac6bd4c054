package leafid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxBodyBytes bounds a response body read: 100000 ids of 19 digits as JSON strings fit in
// about 2.3 MB.
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

// request is one batch request and what its answer must look like.
type request struct {
	// route is the path, e.g. /api/v1/segment/orders/ids (the tag is valid, so nothing to escape).
	route string
	// count is the ids asked for (Config.Batch); a refill asks for more while a server is behind.
	count int
	// tag is the tag the body must name (segment route); empty for snowflake.
	tag string
}

// fetchResult is the outcome of one fetch: ids, or an answer wholly behind the floor, or a
// refusal, or every server failed.
type fetchResult struct {
	// ids of a valid 200 body, strictly increasing and positive.
	ids []int64
	// behind is a 200 whose last id lay at or below the floor, read from its tail only.
	behind *behindAnswer
	// server is the base URL of the server that sent ids or behind.
	server string
	// rejected is set when a server refused the request itself (final).
	rejected *RejectedError
	// fault is the last server failure when no server delivered (nil if none could be asked).
	fault *ServerFault
}

// finalCodes are the refusals of the request itself: every server shares the database and would
// answer the same, so they reach the caller and are no failover.
var finalCodes = map[string]bool{
	"unknown_biz_tag":   true,
	"invalid_biz_tag":   true,
	"biz_tag_exhausted": true,
	"invalid_count":     true,
	"invalid_request":   true,
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

// fetch asks for one batch: the preferred server first, then the other up servers in order,
// then (last resort) the down ones. It stops at the first valid batch or the first refusal of
// the request itself. A 200 whose last id lies at or below floor (the supply's largest accepted
// id, 0 for none) comes back as behind, unparsed (behindTail).
func (s *servers) fetch(ctx context.Context, req *request, count int, floor int64) fetchResult {
	n := len(s.list)
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
				return fetchResult{fault: last}
			}
			if last != nil {
				// The server asked before this one failed: this request fails over.
				s.failovers.Add(1)
			}
			tried[i] = true
			seen := s.list[i].downCount()
			ids, behind, rejected, fault := s.ask(ctx, s.list[i], req, count, floor)
			switch {
			case fault != nil:
				if ctx.Err() != nil {
					// Closing, not the server's fault.
					return fetchResult{fault: last}
				}
				s.markDown(s.list[i])
				last = fault
			case rejected != nil:
				return fetchResult{rejected: rejected}
			default:
				if s.list[i].markUpUnlessDownSince(seen) {
					s.preferred.Store(int64(i))
				}
				return fetchResult{ids: ids, behind: behind, server: s.list[i].base}
			}
		}
	}
	return fetchResult{fault: last}
}

// idsBody is the 200 body of both batch routes (biz_tag only on the segment one). Ids are read
// as json.Number (the decimal text, string or number) and parsed exactly as int64.
type idsBody struct {
	BizTag *string       `json:"biz_tag"`
	IDs    []json.Number `json:"ids"`
}

// errorBody is the server's error body, read leniently.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ask sends one batch request for count ids to one server: ids, or an answer behind floor, or a
// refusal, or that server's fault.
func (s *servers) ask(ctx context.Context, srv *server, req *request, count int, floor int64) ([]int64, *behindAnswer, *RejectedError, *ServerFault) {
	ctx, cancel := context.WithTimeout(ctx, s.requestTimeout)
	defer cancel()
	fault := func(kind FaultKind, status int, code, detail string) *ServerFault {
		return &ServerFault{Server: srv.base, Kind: kind, Status: status, Code: code, Detail: detail}
	}
	url := srv.base + req.route + "?count=" + strconv.Itoa(count) + "&stringify_ids=true"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, nil, fault(FaultTransport, 0, "", err.Error())
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(hreq)
	if err != nil {
		return nil, nil, nil, fault(FaultTransport, 0, "", err.Error())
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, nil, nil, fault(FaultTransport, 0, "", "reading the body: "+err.Error())
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		var eb errorBody
		_ = json.Unmarshal(body, &eb)
		if finalCodes[eb.Code] {
			return nil, nil, &RejectedError{Server: srv.base, Status: resp.StatusCode, Code: eb.Code, Message: eb.Message}, nil
		}
		return nil, nil, nil, fault(FaultStatus, resp.StatusCode, eb.Code, "")
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		_ = json.Unmarshal(body, &eb)
		return nil, nil, nil, fault(FaultStatus, resp.StatusCode, eb.Code, "")
	}
	if len(body) > maxBodyBytes {
		return nil, nil, nil, fault(FaultBadResponse, 0, "", "body too large")
	}
	if b := behindTail(body, count, floor); b != nil {
		return nil, b, nil, nil
	}
	ids, err := parseBatch(body, req.tag, count)
	if err != nil {
		return nil, nil, nil, fault(FaultBadResponse, 0, "", err.Error())
	}
	return ids, nil, nil, nil
}

// behindAnswer is a 200 answer lying wholly at or below the floor: its size and its last id.
type behindAnswer struct {
	ids  int
	last int64
}

// behindTail is the size and last id of a 200 body that ends the way leafid writes a batch
// (`..."ids":[...,"<last id>"]}`) when that last id lies at or below floor; else nil, and the
// body is parsed whole. It reads the tail and counts commas: a catch-up discards answer after
// answer of 100000 ids, and none of them is handed out, so none needs decoding or validating.
func behindTail(body []byte, count int, floor int64) *behindAnswer {
	if floor <= 0 {
		return nil
	}
	rest := bytes.TrimRight(body, " \t\r\n")
	if !bytes.HasSuffix(rest, []byte(`"]}`)) {
		return nil
	}
	rest = rest[:len(rest)-3]
	p := len(rest)
	for p > 0 && len(rest)-p < 19 && rest[p-1] >= '0' && rest[p-1] <= '9' {
		p--
	}
	if p == len(rest) || p == 0 || rest[p-1] != '"' || rest[p] == '0' {
		return nil
	}
	last, err := strconv.ParseInt(string(rest[p:]), 10, 64)
	if err != nil || last > floor {
		return nil
	}
	// The array's opening, near the start (a tag cannot hold a quote).
	open := bytes.Index(rest[:p], []byte(`"ids":[`))
	if open < 0 {
		return nil
	}
	ids := 1 + bytes.Count(rest[open:p], []byte{','})
	if ids > count {
		return nil
	}
	return &behindAnswer{ids: ids, last: last}
}

// parseBatch reads a 200 body as a batch. It is one only if it has 1..=count ids, each an exact
// positive int64, strictly increasing, for the tag asked. Anything else is the server's fault
// and none of its ids is used.
//
// The body is read by scanBatch, a scanner of the exact shape leafid sends; whatever it does not
// recognise is read by encoding/json instead, so only the speed depends on the scanner.
func parseBatch(body []byte, wantTag string, count int) ([]int64, error) {
	tag, hasTag, ids, ok := scanBatch(body)
	if !ok {
		var err error
		if tag, hasTag, ids, err = decodeBatch(body); err != nil {
			return nil, err
		}
	}
	if wantTag != "" {
		if !hasTag {
			return nil, errors.New("no biz_tag in the body")
		}
		if tag != wantTag {
			return nil, fmt.Errorf("asked for tag %q, got %q", wantTag, tag)
		}
	}
	if len(ids) == 0 || len(ids) > count {
		return nil, fmt.Errorf("%d ids for a count of %d", len(ids), count)
	}
	for i, id := range ids {
		if id <= 0 {
			return nil, fmt.Errorf("id %d is not positive", id)
		}
		if i > 0 && id <= ids[i-1] {
			return nil, fmt.Errorf("ids not increasing: %d then %d", ids[i-1], id)
		}
	}
	return ids, nil
}

// decodeBatch reads a batch body with encoding/json: the tag (hasTag false when absent or null)
// and the ids, each a JSON string or number holding an exact int64.
func decodeBatch(body []byte) (tag string, hasTag bool, ids []int64, err error) {
	var b idsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return "", false, nil, fmt.Errorf("not a batch body: %v", err)
	}
	if b.BizTag != nil {
		tag, hasTag = *b.BizTag, true
	}
	ids = make([]int64, len(b.IDs))
	for i, text := range b.IDs {
		id, err := strconv.ParseInt(string(text), 10, 64)
		if err != nil {
			return "", false, nil, fmt.Errorf("id %q is not a 64-bit integer", string(text))
		}
		ids[i] = id
	}
	return tag, hasTag, ids, nil
}

// scanBatch reads the bodies leafid sends, {"biz_tag":"t","ids":["1","2"]} (keys in any order,
// either absent, JSON whitespace anywhere, ids as strings or numbers), about 30 times faster
// than encoding/json. ok is false on anything else (another key, an escape, a null, an id that
// is not 1 to 19 digits without a leading zero or does not fit an int64, bad JSON): then
// decodeBatch decides. Where ok is true it gives what decodeBatch gives (FuzzScanBatch).
func scanBatch(body []byte) (tag string, hasTag bool, ids []int64, ok bool) {
	i := 0
	ws := func() {
		for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
			i++
		}
	}
	// plain reads a string without escapes or control characters; the index after its quote.
	plain := func() (string, bool) {
		if i >= len(body) || body[i] != '"' {
			return "", false
		}
		start := i + 1
		for j := start; j < len(body); j++ {
			c := body[j]
			if c == '"' {
				i = j + 1
				return string(body[start:j]), true
			}
			if c == '\\' || c < 0x20 || c >= 0x80 {
				return "", false
			}
		}
		return "", false
	}
	ws()
	if i >= len(body) || body[i] != '{' {
		return "", false, nil, false
	}
	i++
	ws()
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			ws()
			key, good := plain()
			if !good {
				return "", false, nil, false
			}
			ws()
			if i >= len(body) || body[i] != ':' {
				return "", false, nil, false
			}
			i++
			ws()
			switch key {
			case "biz_tag":
				if tag, good = plain(); !good {
					return "", false, nil, false
				}
				hasTag = true
			case "ids":
				if ids, good = scanIDs(body, &i); !good {
					return "", false, nil, false
				}
			default:
				return "", false, nil, false
			}
			ws()
			if i < len(body) && body[i] == ',' {
				i++
				continue
			}
			if i < len(body) && body[i] == '}' {
				i++
				break
			}
			return "", false, nil, false
		}
	}
	ws()
	if i != len(body) {
		return "", false, nil, false
	}
	if ids == nil {
		ids = []int64{}
	}
	return tag, hasTag, ids, true
}

// scanIDs reads a JSON array of ids at body[*i:], each "digits" or digits (1 to 19 digits, no
// leading zero unless the id is 0, within int64), and moves *i past it.
func scanIDs(body []byte, i *int) ([]int64, bool) {
	p := *i
	if p >= len(body) || body[p] != '[' {
		return nil, false
	}
	p++
	ids := make([]int64, 0, bytesCount(body[p:], ',')+1)
	skip := func() {
		for p < len(body) && (body[p] == ' ' || body[p] == '\t' || body[p] == '\n' || body[p] == '\r') {
			p++
		}
	}
	skip()
	if p < len(body) && body[p] == ']' {
		*i = p + 1
		return ids, true
	}
	for {
		skip()
		quoted := p < len(body) && body[p] == '"'
		if quoted {
			p++
		}
		start := p
		var v uint64
		for p < len(body) && body[p] >= '0' && body[p] <= '9' {
			v = v*10 + uint64(body[p]-'0')
			p++
			if p-start > 19 {
				return nil, false
			}
		}
		n := p - start
		if n == 0 || (n > 1 && body[start] == '0') || v > 1<<63-1 {
			return nil, false
		}
		if quoted {
			if p >= len(body) || body[p] != '"' {
				return nil, false
			}
			p++
		} else if p < len(body) && (body[p] == '.' || body[p] == 'e' || body[p] == 'E') {
			return nil, false
		}
		ids = append(ids, int64(v))
		skip()
		if p < len(body) && body[p] == ',' {
			p++
			continue
		}
		if p < len(body) && body[p] == ']' {
			*i = p + 1
			return ids, true
		}
		return nil, false
	}
}

// bytesCount counts c in b (a capacity hint).
func bytesCount(b []byte, c byte) int {
	n := 0
	for _, x := range b {
		if x == c {
			n++
		}
	}
	return n
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
