package leafid

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestParseRangesTakesOnlyValidBatchesOfTheTag(t *testing.T) {
	r := func(pairs ...int64) []idRun {
		var out []idRun
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, idRun{pairs[i], pairs[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		body  string
		tag   string
		asked int
		want  []idRun
	}{
		{`{"biz_tag":"t","count":3,"ranges":[{"first":"1","last":"2"},{"first":"5","last":"5"}]}`, "t", 3, r(1, 2, 5, 5)},
		{` { "ranges" : [ { "last" : "7" , "first" : "3" } ] , "count" : 5, "biz_tag" : "t" } `, "t", 9, r(3, 7)},
		// Numbers where strings were asked (ids, or a count as a string): not the answer asked for.
		{`{"biz_tag":"t","count":5,"ranges":[{"last":7,"first":3}]}`, "t", 9, nil},
		{`{"biz_tag":"t","count":"5","ranges":[{"last":"7","first":"3"}]}`, "t", 9, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"9223372036854775807","last":"9223372036854775807"}]}`, "t", 1, r(9223372036854775807, 9223372036854775807)},
		{`{"count":9223372036854775807,"ranges":[{"first":"1","last":"9223372036854775807"}]}`, "", math.MaxInt32, nil},
		{`{"count":2,"ranges":[{"first":"7","last":"8"}]}`, "", 2, r(7, 8)},
		{`{"count":1,"ranges":[{"first":"7","last":"7"}],"biz_tag":"x","extra":{"a":[1]}}`, "", 1, r(7, 7)},
		{`{"biz_tag":"\u0074","count":1,"ranges":[{"first":"1","last":"1"}]}`, "t", 1, r(1, 1)},
		// More than asked, none, a count that is not the sum, bad ends, overlaps, another tag.
		{`{"biz_tag":"t","count":4,"ranges":[{"first":"1","last":"4"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":0,"ranges":[]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":null}`, "t", 3, nil},
		{`{"biz_tag":"t","ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":2,"ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"1","last":"2"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":2,"ranges":[{"first":"0","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"-1","last":"-1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"2","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":2,"ranges":[{"first":"2","last":"2"},{"first":"2","last":"2"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":3,"ranges":[{"first":"2","last":"3"},{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":3,"ranges":[{"first":"1","last":"2"},{"first":"2","last":"2"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"9223372036854775808","last":"9223372036854775808"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"1e0","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"01","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"+1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":true,"last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1.0,"ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"u","count":1,"ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":null,"count":1,"ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"count":1,"ranges":[{"first":"1","last":"1"}]}`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"1","last":"1"}]} x`, "t", 3, nil},
		{`{"biz_tag":"t","count":1,"ranges":[{"first":"1","last":"1"}]`, "t", 3, nil},
		{``, "t", 3, nil},
		{`[]`, "t", 3, nil},
	} {
		got, err := parseRanges([]byte(c.body), c.tag, c.asked)
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: accepted %v", c.body, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.body, got, err, c.want)
		}
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := newServers([]string{"http://h:1"}, nil, time.Second, 50*time.Millisecond, 5*time.Second)
	got := []time.Duration{s.backoff(1), s.backoff(2), s.backoff(3), s.backoff(8), s.backoff(1 << 30)}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestA200SentBeforeTheLatestFailureMarksNothingUp(t *testing.T) {
	s := newServers([]string{"http://h:1"}, nil, time.Second, 50*time.Millisecond, 5*time.Second)
	srv := s.list[0]
	// A request is sent; another one to the same server fails (it was killed); then the first
	// one's 200 arrives: older news than that failure.
	seen := srv.downCount()
	s.markDown(srv)
	if srv.markUpUnlessDownSince(seen) || !srv.isDown() {
		t.Fatal("a 200 sent before the failure marked the server up")
	}
	if !srv.markUpUnlessDownSince(srv.downCount()) || srv.isDown() {
		t.Fatal("a 200 sent after the failure did not mark the server up")
	}
}

func TestTheCatchUpAsksPastTheFloorInOneRequestWithinTheRouteLimit(t *testing.T) {
	for _, c := range []struct {
		floor, last int64
		size, limit int
		want        int
	}{
		{1000, 500, 100, MaxBatch, 600}, // 500 ids to reach the floor, then a batch
		{1000, 1000, 100, MaxBatch, 100},
		{6000000, 1000000, 100, MaxBatch, MaxBatch},
		{1500000, 1000000, 100, MaxBatch, 500100},
		{1500000, 1000000, 100, MaxSnowflakeBatch, MaxSnowflakeBatch},
		{math.MaxInt64, 1, 100, MaxBatch, MaxBatch},
		{10, 5, MaxBatch, MaxBatch, MaxBatch},
	} {
		if got := catchUpCount(c.floor, c.last, c.size, c.limit); got != c.want {
			t.Errorf("catchUpCount(%d, %d, %d, %d) = %d, want %d", c.floor, c.last, c.size, c.limit, got, c.want)
		}
	}
}

func TestTheBatchSizeFollowsDemandWithinItsBounds(t *testing.T) {
	const target = time.Second
	ms := time.Millisecond
	for _, c := range []struct {
		name           string
		size, min, max int
		used, total    int64
		elapsed        time.Duration
		starved        bool
		want           int
	}{
		{"no batch in use yet: unchanged", 1000, 1000, MaxBatch, 0, 0, 0, false, 1000},
		{"no batch in use, starved: doubles", 1000, 1000, MaxBatch, 0, 0, 0, true, 2000},
		{"projected 100 ms, below half the target: doubles", 1000, 1000, MaxBatch, 100, 1000, 10 * ms, false, 2000},
		{"projected just below 500 ms: doubles", 1000, 1000, MaxBatch, 1000, 1000, 499 * ms, false, 2000},
		{"projected 500 ms: kept", 1000, 1000, MaxBatch, 1000, 1000, 500 * ms, false, 1000},
		{"projected 1 s: kept", 4000, 1000, MaxBatch, 100, 4000, 25 * ms, false, 4000},
		{"projected 2 s: kept", 4000, 1000, MaxBatch, 2000, 4000, time.Second, false, 4000},
		{"projected 4 s, above twice the target: halves", 4000, 1000, MaxBatch, 1000, 4000, time.Second, false, 2000},
		{"idle (nothing used for an hour): halves", 4000, 1000, MaxBatch, 0, 4000, time.Hour, false, 2000},
		{"huge batch idle for years: halves without overflow", MaxBatch, 1000, MaxBatch, 1, MaxBatch, 1 << 62, false, MaxBatch / 2},
		{"never below batch", 1000, 1000, MaxBatch, 1, 1000, time.Minute, false, 1000},
		{"never above max batch", 800000, 1000, MaxBatch, 100000, 800000, ms, false, MaxBatch},
		{"starved at max: stays", MaxBatch, 1000, MaxBatch, 0, 0, 0, true, MaxBatch},
		{"starved beats a long projection", 4000, 1000, MaxBatch, 1, 4000, time.Hour, true, 8000},
		{"under 1 ms counts 1 ms", 10, 10, 100000, 10, 10, 0, false, 20},
		{"snowflake bound", 80000, 1000, MaxSnowflakeBatch, 80000, 80000, ms, false, MaxSnowflakeBatch},
	} {
		got := nextBatchSize(c.size, c.min, c.max, c.used, c.total, c.elapsed, target, c.starved)
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestADemandingCallerGrowsTheSizeAndAnIdleOneShrinksIt(t *testing.T) {
	// The supply's own bookkeeping, no server: a batch of 1000 used 10% within a millisecond
	// grows the next request; one used 10% in 30 s shrinks it.
	s := fixedSupply(1000)
	s.client.cfg.TargetLifetime = time.Second
	s.size, s.minSize, s.maxSize = 4000, 1000, MaxBatch
	for i := 0; i < 100; i++ {
		if _, ok := s.tryNextID(); !ok {
			t.Fatal("the fixed batch is spent")
		}
	}
	r := s.load()
	r.batch.since = time.Now()
	if got := s.sizeLocked(r.batch.since.Add(time.Millisecond)); got != 8000 {
		t.Fatalf("fast: %d, want 8000", got)
	}
	if got := s.sizeLocked(r.batch.since.Add(30 * time.Second)); got != 4000 {
		t.Fatalf("slow: %d, want 4000", got)
	}
	// A catch-up request does not change it.
	catchUpCount(5000000, 1000000, s.size, MaxBatch)
	s.starved = true
	if got := s.sizeLocked(r.batch.since.Add(time.Second)); got != 8000 || s.starved {
		t.Fatalf("starved: %d (starved %v), want 8000", got, s.starved)
	}
}
