package leafid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// orderFormat is the conformance scenario's daily order number: ORD-yyyyMMdd + 8 digits, UTC.
const orderFormat = `{"prefix":"ORD-","date":"yyyyMMdd","width":8,"reset":"daily","time_zone":"UTC"}`

var orderText = regexp.MustCompile(`^ORD-[0-9]{8}[0-9]{8}$`)

// createFormattedTag creates a formatted tag with step and format (a JSON object).
func createFormattedTag(t testing.TB, base, tag string, step int, format string) {
	t.Helper()
	body := fmt.Sprintf(`{"biz_tag":%q,"step":%d,"format":%s}`, tag, step, format)
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/tags", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("create formatted tag %s: %d %s", tag, resp.StatusCode, b.String())
	}
}

func TestFormattedTextsComeInBatchesFromARealServer(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 50})
	var prev string
	for i := 0; i < 260; i++ {
		text, err := c.NextFormatted(context.Background(), "orders")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !orderText.MatchString(text) {
			t.Fatalf("call %d: %q is not an order number", i, text)
		}
		if text <= prev {
			t.Fatalf("call %d: %q after %q", i, text, prev)
		}
		prev = text
	}
	if today := time.Now().UTC().Format("20060102"); prev[4:12] != today {
		t.Fatalf("%q is not of today (%s, UTC)", prev, today)
	}
	f, err := c.Formatted("orders")
	if err != nil {
		t.Fatal(err)
	}
	if text, ok := f.TryNextID(); !ok || text <= prev {
		t.Fatalf("TryNextID: %q, %v after %q", text, ok, prev)
	}
	st := c.Stats()
	if st.IDsServed != 261 || st.Batches < 2 || st.Failovers != 0 || st.DiscardedIDs != 0 {
		t.Fatalf("%+v", st)
	}
}

// textCall is one call of a concurrent formatted test, ordered on one shared counter.
type textCall struct {
	text       string
	start, end int64
}

func TestConcurrentCallersGetUniqueIncreasingTexts(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 20})
	const callers, per = 6, 1500
	var clock atomic.Int64
	calls := make([][]textCall, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			f, err := c.Formatted("orders")
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < per; i++ {
				start := clock.Add(1)
				var text string
				if i%3 == 2 {
					var ok bool
					if text, ok = f.TryNextID(); !ok {
						text, err = f.NextID(context.Background())
					}
				} else {
					text, err = c.NextFormatted(context.Background(), "orders")
				}
				end := clock.Add(1)
				if err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
				calls[g] = append(calls[g], textCall{text, start, end})
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []textCall
	for _, p := range calls {
		all = append(all, p...)
	}
	seen := make(map[string]bool, len(all))
	for _, x := range all {
		if seen[x.text] || !orderText.MatchString(x.text) {
			t.Fatalf("%q twice or not an order number", x.text)
		}
		seen[x.text] = true
	}
	// Every call that started after another ended got a larger text (byte order).
	byStart := append([]textCall(nil), all...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start < byStart[j].start })
	byEnd := append([]textCall(nil), all...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	maxDone, k := "", 0
	for _, x := range byStart {
		for k < len(byEnd) && byEnd[k].end < x.start {
			if byEnd[k].text > maxDone {
				maxDone = byEnd[k].text
			}
			k++
		}
		if x.text <= maxDone {
			t.Fatalf("a call got %q, not above %q returned before it started", x.text, maxDone)
		}
	}
	if st := c.Stats(); st.IDsServed != callers*per {
		t.Fatalf("served %d, stats %+v", callers*per, st)
	}
}

// The period rule, with the real server's answers and an injected wall clock (the public
// Config.Clock): once the clock
// passes the batch's period_end (the real one, the next UTC midnight), no text of that batch is
// handed out; its texts are counted in DiscardedIDs.
func TestABatchWhosePeriodEndedIsNeverHandedOut(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	var shift atomic.Int64
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 100, WaitTimeout: 400 * time.Millisecond,
		Clock: func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }})
	f, err := c.Formatted("orders")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := 0; i < 5; i++ {
		if last, err = f.NextID(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the prefetch (the preload mark is the 11th text: none yet), then read the real
	// period_end of the batch in use.
	f.s.mu.Lock()
	end := f.s.load().periodEnd
	f.s.mu.Unlock()
	wantEnd := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	if !end.Equal(wantEnd) {
		t.Fatalf("period_end %v, want the next UTC midnight %v", end, wantEnd)
	}
	before := c.Stats()
	// The clock passes period_end: 95 texts of the batch in use are left, none may come out.
	shift.Store(int64(end.Sub(time.Now()) + time.Second))
	if text, ok := f.TryNextID(); ok {
		t.Fatalf("TryNextID handed out %q after its period ended", text)
	}
	for i := 0; i < 3; i++ {
		text, err := f.NextID(context.Background())
		var un *UnavailableError
		if err == nil || !errors.As(err, &un) {
			t.Fatalf("NextID after the period ended: %q, %v", text, err)
		}
	}
	st := c.Stats()
	if st.IDsServed != before.IDsServed || st.IDsServed != 5 {
		t.Fatalf("texts handed out after the period ended: before %+v, after %+v", before, st)
	}
	// Every text received but not handed out is counted (a refill may still be running, or its
	// batch not looked at yet: at least).
	if st.DiscardedIDs < 95 || st.IDsReceived < st.IDsServed+st.DiscardedIDs {
		t.Fatalf("%+v", st)
	}
	if st.Failovers != 0 {
		t.Fatalf("a period's end is no server's failure: %+v", st)
	}
	// The clock back: texts again, above every one before.
	shift.Store(0)
	text, err := f.NextID(context.Background())
	if err != nil || text <= last {
		t.Fatalf("%q, %v after %q", text, err, last)
	}
}

// The default clock's period check (issue 47): no clock read per text, a deadline timer armed at
// receipt sets the batch's ended flag. Here the deadline passes between two texts (the timer of
// the batch in use re-armed to fire in 20 ms, as it would at period_end): the first text is
// handed out, the second is not taken from that batch (its 99 texts left are discarded) but
// from a new answer, above the first.
func TestTheDeadlinePassesBetweenTwoTexts(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 100, WaitTimeout: 2 * time.Second})
	f, err := c.Formatted("orders")
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.s.mu.Lock()
	b := f.s.load()
	if b.ended.Load() || b.deadline == nil {
		f.s.mu.Unlock()
		t.Fatalf("a fresh batch of the default clock: ended %v, timer %v", b.ended.Load(), b.deadline)
	}
	b.armDeadline(20 * time.Millisecond)
	f.s.mu.Unlock()
	deadline := time.Now().Add(2 * time.Second)
	for !b.ended.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the deadline timer never fired")
		}
		time.Sleep(5 * time.Millisecond)
	}
	second, err := f.NextID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Fatalf("%q after %q", second, first)
	}
	st := c.Stats()
	if st.IDsServed != 2 || st.DiscardedIDs != 99 || st.Batches != 2 {
		t.Fatalf("want 2 served, 99 discarded (the ended batch), 2 batches: %+v", st)
	}
	if f.s.load() == b {
		t.Fatal("the ended batch is still in use")
	}
}

func TestAPlainTagOnTheFormattedSupplyIsNotFormatted(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createTag(t, srv.URL, "plain", 100, "")
	c := newClient(t, Config{Servers: []string{srv.URL, closedPort(t)}, Batch: 10})
	for i := 0; i < 3; i++ {
		_, err := c.NextFormatted(context.Background(), "plain")
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Code != "not_formatted" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := c.NextFormatted(context.Background(), "no-such-tag"); err == nil {
		t.Fatal("an unknown tag gave a text")
	} else if rej := (*RejectedError)(nil); !errors.As(err, &rej) || rej.Code != "unknown_biz_tag" {
		t.Fatalf("%v", err)
	}
	if _, err := c.NextFormatted(context.Background(), "no such/tag"); !errors.As(err, new(*InvalidTagError)) {
		t.Fatalf("%v", err)
	}
	if st := c.Stats(); st.Failovers != 0 || st.IDsServed != 0 {
		t.Fatalf("%+v", st)
	}
	// The numeric supply of the same tag still works.
	if _, err := c.NextID(context.Background(), "plain"); err != nil {
		t.Fatal(err)
	}
}

func TestANumericSupplyOnAFormattedTagIsRefused(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{srv.URL, closedPort(t)}, Batch: 10})
	for i := 0; i < 2; i++ {
		_, err := c.NextID(context.Background(), "orders")
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Code != "formatted_tag" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestAKilledServerIsFailedOverForFormattedTexts(t *testing.T) {
	db := database(t)
	a := startServer(t, db, 0)
	b := startServer(t, db, 0)
	createFormattedTag(t, a.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{a.URL, b.URL}, Batch: 10, BackoffMin: 10 * time.Millisecond})
	var prev string
	for i := 0; i < 400; i++ {
		if i == 100 {
			a.kill()
		}
		text, err := c.NextFormatted(context.Background(), "orders")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if text <= prev {
			t.Fatalf("call %d: %q after %q", i, text, prev)
		}
		prev = text
	}
	if st := c.Stats(); st.Failovers < 1 || st.IDsServed != 400 {
		t.Fatalf("%+v", st)
	}
}

func TestParseFormattedTakesOnlyValidBodies(t *testing.T) {
	good := `{"biz_tag":"o","ids":["A-1","A-2"],"period":"x","period_end":"2026-11-28T00:00:00Z"}`
	got, plain, err := parseFormatted([]byte(good), "o", 2)
	if err != nil || plain || len(got.texts) != 2 || got.texts[1] != "A-2" || got.unordered ||
		!got.periodEnd.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v %v", got, plain, err)
	}
	if _, plain, err := parseFormatted([]byte(`{"biz_tag":"o","ids":[10,11]}`), "o", 2); !plain || err != nil {
		t.Fatalf("numeric ids without period_end: %v %v", plain, err)
	}
	for _, bad := range []string{
		`{"biz_tag":"o","ids":["A-1","A-2"],"period_end":"2026-11-28T00:00:00Z"}`, // more than asked (1)
		`{"biz_tag":"o","ids":["A-1","A-2"],"period_end":"2026-11-28T00:00:00Z","ordered":false}`,
		`{"biz_tag":"p","ids":["A-1"],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"ids":["A-1"],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":[],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":[],"period_end":"2026-11-28T00:00:00Z","ordered":false}`,
		`{"biz_tag":"o","ids":[""],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":[""],"period_end":"2026-11-28T00:00:00Z","ordered":false}`,
		`{"biz_tag":"o","ids":[1],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":["A-1"],"period_end":"tomorrow"}`,
		`{"biz_tag":"o","ids":["A-1"],"period_end":"tomorrow","ordered":false}`,
		`{"biz_tag":"o","ids":["A-1"]}`,
		`{"biz_tag":"o","ids":["A-1"],"ordered":false}`,
		`{"biz_tag":"o","ids":["A-1"],"period_end":null}`,
		`{"biz_tag":"o","ids":["A-1"],"period_end":"2026-11-28T00:00:00Z","ordered":"false"}`,
		`not json`,
	} {
		if _, plain, err := parseFormatted([]byte(bad), "o", 1); err == nil || plain {
			t.Fatalf("took %s", bad)
		}
	}
	for _, bad := range []string{
		`{"biz_tag":"o","ids":["A-2","A-1"],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":["A-2","A-1"],"period_end":"2026-11-28T00:00:00Z","ordered":true}`,
		`{"biz_tag":"o","ids":["A-2","A-1"],"period_end":"2026-11-28T00:00:00Z","ordered":null}`,
		`{"biz_tag":"o","ids":["A-1","A-1"],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":["A-1",2],"period_end":"2026-11-28T00:00:00Z"}`,
		`{"biz_tag":"o","ids":["A-1",2],"period_end":"2026-11-28T00:00:00Z","ordered":false}`,
	} {
		if _, _, err := parseFormatted([]byte(bad), "o", 5); err == nil {
			t.Fatalf("took %s", bad)
		}
	}
	// "ordered": false (a permuted tag): the texts in no order, taken as received.
	unordered := `{"biz_tag":"o","ids":["T-9F3K2Q","T-0A1B2C","T-ZZZZZZ"],"period":"","period_end":"9999-12-30T22:00:00.999999999Z","ordered":false}`
	got, plain, err = parseFormatted([]byte(unordered), "o", 3)
	if err != nil || plain || !got.unordered || len(got.texts) != 3 ||
		got.texts[0] != "T-9F3K2Q" || got.texts[1] != "T-0A1B2C" || got.texts[2] != "T-ZZZZZZ" {
		t.Fatalf("%+v %v %v", got, plain, err)
	}
	if got, _, err := parseFormatted([]byte(`{"biz_tag":"o","ids":["A-1"],"period_end":"2026-11-28T00:00:00Z","ordered":true}`), "o", 1); err != nil || got.unordered {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestCloseEndsAFormattedSupply(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	waitGoroutines := func(want int) int {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= want || time.Now().After(deadline) {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	baseline := waitGoroutines(0)
	c, err := New(Config{Servers: []string{srv.URL}, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := c.NextFormatted(context.Background(), "orders"); err != nil {
			t.Fatal(err)
		}
	}
	// A caller waiting for texts when Close comes (the only server stopped).
	srv.signal(t, syscall.SIGSTOP)
	waiting := make(chan error, 1)
	go func() {
		for {
			if _, err := c.NextFormatted(context.Background(), "orders"); err != nil {
				waiting <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	served := c.Stats().IDsServed
	c.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("a waiting caller got %v", err)
	}
	if n := waitGoroutines(baseline); n > baseline {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
	f, _ := c.Formatted("orders")
	if text, ok := f.TryNextID(); ok {
		t.Fatalf("TryNextID after Close: %q", text)
	}
	if _, err := f.NextID(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if st := c.Stats(); st.IDsServed != served {
		t.Fatalf("served %d, then %d after Close", served, st.IDsServed)
	}
}

// A server behind the one used before (here: another database, so its texts of today restart at
// 1): its texts are cut and counted, the catch-up asks for twice the size at once, and callers
// see no error and only larger texts.
func TestALaggingServersTextsAreCutUntilItCatchesUp(t *testing.T) {
	a := startServer(t, database(t), 0)
	b := startServer(t, database(t), 0)
	createFormattedTag(t, a.URL, "orders", 100, orderFormat)
	createFormattedTag(t, b.URL, "orders", 100, orderFormat)
	c := newClient(t, Config{Servers: []string{a.URL, b.URL}, Batch: 20, MaxBatch: 20, BackoffMin: 10 * time.Millisecond})
	var prev string
	for i := 0; i < 600; i++ {
		if i == 300 {
			a.kill()
		}
		text, err := c.NextFormatted(context.Background(), "orders")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if text <= prev {
			t.Fatalf("call %d: %q after %q", i, text, prev)
		}
		prev = text
	}
	f, _ := c.Formatted("orders")
	st := c.Stats()
	// b's texts up to the floor (300 and more) are behind, asked 40 at a time.
	if st.Failovers < 1 || st.DiscardedIDs < 300 || st.IDsServed != 600 {
		t.Fatalf("%+v", st)
	}
	f.s.mu.Lock()
	size := f.s.size
	f.s.mu.Unlock()
	if size != 20 {
		t.Fatalf("the catch-up changed the size to %d", size)
	}
}

// The clock hook from the start: a client whose Config.Clock runs two days ahead finds every
// answer's period (today, by the server's clock) already ended when it arrives. Nothing is
// handed out, every text received is counted as discarded, and it is no server's failure.
func TestAClockAheadDiscardsEveryAnswerOfAnEndedPeriod(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	var calls atomic.Int64
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 30, MaxBatch: 30, WaitTimeout: 300 * time.Millisecond,
		Clock: func() time.Time { calls.Add(1); return time.Now().Add(48 * time.Hour) }})
	for i := 0; i < 2; i++ {
		text, err := c.NextFormatted(context.Background(), "orders")
		var un *UnavailableError
		if !errors.As(err, &un) {
			t.Fatalf("call %d: %q, %v", i, text, err)
		}
	}
	st := c.Stats()
	if st.IDsServed != 0 || st.Batches < 1 || st.DiscardedIDs < 30 || st.Failovers != 0 {
		t.Fatalf("%+v", st)
	}
	if calls.Load() == 0 {
		t.Fatal("Config.Clock was never read")
	}
}

// permutingProxy stands between a client and a real server's list route and turns its ordered
// answers into unordered ones ("ordered": false, each answer's texts reversed), holding the
// first answer back so that the second one served lies wholly below the first in byte order:
// what a floor would cut. Everything else is passed through. sent records the texts of each
// answer, in the order served.
type permutingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	held []string
	sent [][]string
}

func newPermutingProxy(t *testing.T, real string) *permutingProxy {
	p := &permutingProxy{}
	fetch := func(r *http.Request) (map[string]any, []string) {
		resp, err := http.Get(real + r.URL.RequestURI())
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		defer resp.Body.Close()
		var body map[string]any
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			t.Errorf("the real server answered %d", resp.StatusCode)
			return nil, nil
		}
		var texts []string
		for _, x := range body["ids"].([]any) {
			texts = append(texts, x.(string))
		}
		return body, texts
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/ids") {
			http.Redirect(w, r, real+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		body, texts := fetch(r)
		if body == nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if len(p.sent) == 0 && p.held == nil {
			// The first answer is held back: the second one, above it, is served first.
			p.held = texts
			if _, texts = fetch(r); texts == nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		} else if len(p.sent) == 1 {
			// The held answer now, below everything served before.
			texts = p.held
		}
		for i, j := 0, len(texts)-1; i < j; i, j = i+1, j-1 {
			texts[i], texts[j] = texts[j], texts[i]
		}
		body["ids"], body["ordered"] = texts, false
		p.sent = append(p.sent, texts)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(p.Close)
	return p
}

// Unordered answers ("ordered": false, as a permuted tag's): the texts are handed out in the
// order received, with no byte-order check and no floor (an answer lying wholly below the one
// before is taken whole, nothing discarded), and the period rule still holds: once the clock
// passes their period_end, no text of them is handed out, and only those count as discarded.
// The answers are a real server's, reordered by permutingProxy.
func TestUnorderedAnswersAreHandedOutAsReceivedWithoutAFloor(t *testing.T) {
	srv := startServer(t, database(t), 0)
	createFormattedTag(t, srv.URL, "orders", 100, orderFormat)
	proxy := newPermutingProxy(t, srv.URL)
	var shift atomic.Int64
	c := newClient(t, Config{Servers: []string{proxy.URL}, Batch: 20, MaxBatch: 20, WaitTimeout: 400 * time.Millisecond,
		Clock: func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }})
	var got []string
	for i := 0; i < 100; i++ {
		text, err := c.NextFormatted(context.Background(), "orders")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		got = append(got, text)
	}
	proxy.mu.Lock()
	var sent []string
	for _, answer := range proxy.sent {
		sent = append(sent, answer...)
	}
	answers := len(proxy.sent)
	proxy.mu.Unlock()
	if answers < 5 || len(sent) < len(got) {
		t.Fatalf("%d answers, %d texts sent for %d handed out", answers, len(sent), len(got))
	}
	for i := range got {
		if got[i] != sent[i] {
			t.Fatalf("text %d handed out %q, the answers held %q there: not in the order received", i, got[i], sent[i])
		}
	}
	// The second answer lies wholly below the first (held back), and descends: a floor or a
	// byte-order check would have cut or refused it.
	if !(got[20] < got[19] && got[39] < got[0]) {
		t.Fatalf("the proxy did not reorder: %q %q %q %q", got[0], got[19], got[20], got[39])
	}
	st := c.Stats()
	if st.IDsServed != 100 || st.DiscardedIDs != 0 || st.Failovers != 0 {
		t.Fatalf("%+v", st)
	}
	// The period rule holds for unordered answers too.
	f, _ := c.Formatted("orders")
	f.s.mu.Lock()
	end := f.s.load().periodEnd
	f.s.mu.Unlock()
	shift.Store(int64(end.Sub(time.Now()) + time.Second))
	if text, ok := f.TryNextID(); ok {
		t.Fatalf("TryNextID handed out %q after its period ended", text)
	}
	if text, err := f.NextID(context.Background()); !errors.As(err, new(*UnavailableError)) {
		t.Fatalf("NextID after the period ended: %q, %v", text, err)
	}
	st = c.Stats()
	if st.IDsServed != 100 || st.DiscardedIDs == 0 || st.IDsReceived < st.IDsServed+st.DiscardedIDs || st.Failovers != 0 {
		t.Fatalf("%+v", st)
	}
}
