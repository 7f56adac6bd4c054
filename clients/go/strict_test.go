package leafid

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Strict tags (issue 45): an answer with "strict": true turns a supply into pass-through for
// good: the ids it holds and that answer's are discarded, no prefetch starts again, and every
// later call is one request for one id. Against a local server that records every count asked
// and answers scripted ranges.

// strictFake answers request n (from 0) for count ids with one run from script(count, n).
type strictFake struct {
	mu     sync.Mutex
	counts []int
	script func(count, n int) (first int64, strict bool)
	srv    *httptest.Server
}

func newStrictFake(t *testing.T, script func(count, n int) (int64, bool)) *strictFake {
	f := &strictFake{script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health/ready" {
			w.WriteHeader(http.StatusOK)
			return
		}
		count, _ := strconv.Atoi(r.URL.Query().Get("count"))
		f.mu.Lock()
		first, strict := f.script(count, len(f.counts))
		f.counts = append(f.counts, count)
		f.mu.Unlock()
		body := map[string]any{
			"biz_tag": "msgs",
			"count":   count,
			"ranges": []map[string]string{{
				"first": strconv.FormatInt(first, 10),
				"last":  strconv.FormatInt(first+int64(count)-1, 10),
			}},
		}
		if strict {
			body["strict"] = true
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *strictFake) seen() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.counts...)
}

// consecutive: ids from 1; answers from request strictFrom on are marked strict.
func consecutive(strictFrom int) func(int, int) (int64, bool) {
	next := int64(1)
	return func(count, n int) (int64, bool) {
		first := next
		next += int64(count)
		return first, n >= strictFrom
	}
}

func strictClient(t *testing.T, base string, batch int) *Client {
	c, err := New(Config{Servers: []string{base}, Batch: batch, WaitTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func TestStrictAnswerTurnsTheSupplyIntoPassThrough(t *testing.T) {
	f := newStrictFake(t, consecutive(0))
	c := strictClient(t, f.srv.URL, 50)
	ctx := context.Background()
	for i := 0; i < 21; i++ {
		id, err := c.NextID(ctx, "msgs")
		if err != nil {
			t.Fatal(err)
		}
		// The first answer (1..50) revealed the tag strict: dropped whole, never handed out.
		if id != int64(51+i) {
			t.Fatalf("call %d: id %d, want %d", i, id, 51+i)
		}
	}
	time.Sleep(50 * time.Millisecond) // a prefetch, if one were started, would show now
	want := append([]int{50}, ones(21)...)
	if got := f.seen(); !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %v, want %v (one request of one id per call)", got, want)
	}
	sup, _ := c.Segment("msgs")
	if id, ok := sup.TryNextID(); ok {
		t.Fatalf("TryNextID on a strict supply gave %d", id)
	}
	if got := f.seen(); !reflect.DeepEqual(got, want) {
		t.Fatalf("TryNextID sent a request: %v", got)
	}
	st := c.Stats()
	if st.IDsServed != 21 || st.Batches != 21 || st.DiscardedIDs != 50 {
		t.Fatalf("stats %+v", st)
	}

	// Concurrent callers: each call its own request; ids distinct, per caller increasing.
	var wg sync.WaitGroup
	got := make([][]int64, 4)
	for g := range got {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id, err := c.NextID(ctx, "msgs")
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], id)
			}
		}(g)
	}
	wg.Wait()
	var all []int64
	for _, ids := range got {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("caller ids not increasing: %v", ids)
			}
		}
		all = append(all, ids...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i, id := range all {
		if id != int64(72+i) {
			t.Fatalf("ids %v, want 72..171 once each", all)
		}
	}
	if n := len(f.seen()); n != 1+21+100 {
		t.Fatalf("%d requests, want %d", n, 1+21+100)
	}
}

func TestSupplyTurningStrictDropsWhatItHolds(t *testing.T) {
	// The first answer is plain (buffered); its preload's answer is strict.
	f := newStrictFake(t, consecutive(1))
	c := strictClient(t, f.srv.URL, 10)
	ctx := context.Background()
	var ids []int64
	for i := 0; i < 2; i++ { // the second id is the preload mark: the refill starts
		id, err := c.NextID(ctx, "msgs")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := 0; i < 200 && len(f.seen()) < 2; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	// Until the strict answer is taken (its ids discarded): polled, not slept, for a slow machine.
	for i := 0; i < 1000 && c.Stats().DiscardedIDs == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	seen := f.seen()
	if len(seen) != 2 {
		t.Fatalf("requests %v, want the first and its preload", seen)
	}
	strictLast := int64(10 + seen[1])
	for i := 0; i < 5; i++ {
		id, err := c.NextID(ctx, "msgs")
		if err != nil {
			t.Fatal(err)
		}
		if id <= strictLast {
			t.Fatalf("id %d handed out after the strict answer up to %d", id, strictLast)
		}
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ids not increasing: %v", ids)
		}
	}
	if got := f.seen()[2:]; !reflect.DeepEqual(got, ones(5)) {
		t.Fatalf("requests after the strict answer %v, want five of one id", got)
	}
	st := c.Stats()
	if st.IDsServed != 7 || st.DiscardedIDs != uint64(8+seen[1]) {
		t.Fatalf("stats %+v: want 7 served, %d discarded (8 held and the strict answer)", st, 8+seen[1])
	}
}

func TestPassThroughIDAtOrBelowTheFloorIsNeverHandedOut(t *testing.T) {
	// Strict 1..20 first (discarded, floor 20); then 7 (behind: a strict server never answers
	// it); then 30, 31.
	f := newStrictFake(t, func(count, n int) (int64, bool) {
		switch n {
		case 0:
			return 1, true
		case 1:
			return 7, true
		}
		return int64(28 + n), true
	})
	c := strictClient(t, f.srv.URL, 20)
	ctx := context.Background()
	for _, want := range []int64{30, 31} {
		id, err := c.NextID(ctx, "msgs")
		if err != nil || id != want {
			t.Fatalf("id %d, %v; want %d", id, err, want)
		}
	}
	if got := f.seen(); !reflect.DeepEqual(got, []int{20, 1, 1, 1}) {
		t.Fatalf("requests %v", got)
	}
	if st := c.Stats(); st.IDsServed != 2 || st.DiscardedIDs != 21 {
		t.Fatalf("stats %+v", st)
	}
}
