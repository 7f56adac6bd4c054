package leafid

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixedSupply is a supply holding the one batch 1..=n that never fetches: the local path alone.
func fixedSupply(n int64) *supply {
	c := &Client{cfg: Config{WaitTimeout: 50 * time.Millisecond, TargetLifetime: time.Second}}
	c.stop, c.cancelStop = context.WithCancel(context.Background())
	s := newSupply(c, nil, 1, 1)
	b := newBatch([]idRun{{1, n}})
	b.since = time.Now()
	s.publish(b.spans[0])
	s.floor = n
	return s
}

func TestAFixedSupplyHandsOutItsIdsOnceThenWaitsInVain(t *testing.T) {
	s := fixedSupply(3)
	for want := int64(1); want <= 3; want++ {
		if id, err := s.nextID(context.Background()); err != nil || id != want {
			t.Fatalf("got %d, %v; want %d", id, err, want)
		}
	}
	if id, ok := s.tryNextID(); ok {
		t.Fatalf("TryNextID handed out %d of a spent supply", id)
	}
	_, err := s.nextID(context.Background())
	if un, ok := err.(*UnavailableError); !ok || un.Last != nil {
		t.Fatalf("%#v", err)
	}
	var st Stats
	s.stats(&st)
	if st.IDsServed != 3 {
		t.Fatalf("%+v", st)
	}
}

func TestAWaitThatEndsBeforeAnyAnswerSaysSo(t *testing.T) {
	s := fixedSupply(1)
	s.client.cfg.WaitTimeout = time.Nanosecond
	s.tryNextID()
	_, err := s.nextID(context.Background())
	if un, ok := err.(*UnavailableError); !ok || un.Last != nil {
		t.Fatalf("%#v", err)
	}
	if msg := err.Error(); !containsAll(msg, "no ids within the 0s wait", "timed out", "none had failed") {
		t.Fatalf("%q does not name the cause", msg)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestConcurrentTakersSplitABatchWithoutOverlap(t *testing.T) {
	const n = 200000
	s := fixedSupply(n)
	got := make([][]int64, 4)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for {
				id, ok := s.tryNextID()
				if !ok {
					return
				}
				if k := len(got[g]); k > 0 && got[g][k-1] >= id {
					t.Errorf("caller %d: %d after %d", g, id, got[g][k-1])
					return
				}
				got[g] = append(got[g], id)
			}
		}(g)
	}
	wg.Wait()
	seen := make([]bool, n+1)
	total := 0
	for _, ids := range got {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d twice", id)
			}
			seen[id] = true
			total++
		}
	}
	if total != n {
		t.Fatalf("%d ids handed out of %d", total, n)
	}
}

// fedSupply is a supply whose next batch is put in place by a goroutine whenever it is missing,
// as a refill that always keeps up would: batches of three runs of five ids with gaps between
// them, so callers switch spans every five ids and batches every fifteen. stop ends the feeder.
func fedSupply() (s *supply, stop func()) {
	s = fixedSupply(5)
	s.client.cfg.WaitTimeout = 10 * time.Second
	done := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		next := int64(10)
		for {
			select {
			case <-done:
				return
			default:
			}
			s.mu.Lock()
			if s.next == nil {
				s.next = newBatch([]idRun{{next, next + 4}, {next + 7, next + 11}, {next + 13, next + 17}})
				next += 20
				close(s.wake)
				s.wake = make(chan struct{})
			}
			s.mu.Unlock()
			runtime.Gosched()
		}
	}()
	return s, func() { close(done); <-fed }
}

// timedCall is one call of a hammer: its id and its start and end on the monotonic clock.
type timedCall struct {
	id         int64
	start, end time.Duration
}

// hammer runs callers goroutines each calling next n times, and fails the test on an error, a
// duplicate, a caller's ids not increasing, or a call that got an id not above that of a call
// which ended (monotonic clock) before it started.
func hammer(t *testing.T, callers, n int, next func(context.Context) (int64, error)) int {
	t.Helper()
	base := time.Now()
	per := make([][]timedCall, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			mine := make([]timedCall, 0, n)
			for i := 0; i < n; i++ {
				start := time.Since(base)
				id, err := next(context.Background())
				end := time.Since(base)
				if err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
				if k := len(mine); k > 0 && id <= mine[k-1].id {
					errs <- fmt.Errorf("caller %d: %d after %d", g, id, mine[k-1].id)
					return
				}
				mine = append(mine, timedCall{id, start, end})
			}
			per[g] = mine
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []timedCall
	for _, p := range per {
		all = append(all, p...)
	}
	seen := make(map[int64]bool, len(all))
	for _, c := range all {
		if c.id <= 0 || seen[c.id] {
			t.Fatalf("id %d handed out twice or not positive", c.id)
		}
		seen[c.id] = true
	}
	byStart := append([]timedCall(nil), all...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start < byStart[j].start })
	byEnd := append([]timedCall(nil), all...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	var maxDone int64 // the largest id of the calls that ended before the current one started
	k := 0
	for _, c := range byStart {
		for k < len(byEnd) && byEnd[k].end < c.start {
			if byEnd[k].id > maxDone {
				maxDone = byEnd[k].id
			}
			k++
		}
		if c.id <= maxDone {
			t.Fatalf("a call started at %v got %d, not above %d of a call that had ended", c.start, c.id, maxDone)
		}
	}
	return len(all)
}

func TestHammerTheLocalPathAcrossSpansAndBatches(t *testing.T) {
	s, stop := fedSupply()
	defer stop()
	n := hammer(t, 8, 20000, s.nextID)
	var st Stats
	s.stats(&st)
	if st.IDsServed != uint64(n) {
		t.Fatalf("served %d, stats %+v", n, st)
	}
}

func TestHammerOneClientOnARealServer(t *testing.T) {
	srv := startServer(t, database(t), 0)
	// A small fixed batch: ranges switch every few ids, and refills run all the time.
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 13, MaxBatch: 13})
	seg, err := c.Segment(seededTag)
	if err != nil {
		t.Fatal(err)
	}
	n := hammer(t, 6, 3000, seg.NextID)
	n += hammer(t, 6, 2000, c.Snowflake().NextID)
	if st := c.Stats(); st.IDsServed != uint64(n) || st.BatchSize != 13 {
		t.Fatalf("served %d, stats %+v", n, st)
	}
}

// fixedFormattedSupply is a formatted supply holding one batch of n order numbers of a period
// that ends in a day, never fetching.
func fixedFormattedSupply(n int) (*formattedSupply, []string) {
	c := &Client{cfg: Config{WaitTimeout: 50 * time.Millisecond, TargetLifetime: time.Second}}
	c.stop, c.cancelStop = context.WithCancel(context.Background())
	s := newFormattedSupply(c, nil, 1, 1)
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("ORD-20261127%08d", i+1)
	}
	s.publish(s.newTextBatch(texts, time.Now().Add(24*time.Hour)))
	return s, texts
}

// hugeSupply is a supply of one range too large to be spent by a benchmark.
func hugeSupply() *Supply { return &Supply{fixedSupply(math.MaxInt64 / 2)} }

// BenchmarkLocal compares NextID served from a local range with a bare atomic.AddInt64 on one
// int64, from one goroutine and from GOMAXPROCS goroutines. bench.sh runs it.
func BenchmarkLocal(b *testing.B) {
	ctx := context.Background()
	b.Run("NextID", func(b *testing.B) {
		s := hugeSupply()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FormattedNextID", func(b *testing.B) {
		// The formatted local path: one add, one compare, the period check (a load of the
		// batch's ended flag, no clock read: issue 47). One batch of a million order numbers, served
		// again from the start (timer stopped) each time it is spent.
		s, texts := fixedFormattedSupply(1000000)
		f := &FormattedSupply{s}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%len(texts) == 0 && i > 0 {
				b.StopTimer()
				s.publish(s.newTextBatch(texts, s.load().periodEnd))
				b.StartTimer()
			}
			if _, err := f.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FormattedNextIDFixedClock", func(b *testing.B) {
		// FormattedNextID without the cost of the clock: a replaced clock that returns one
		// instant (through Config.Clock's indirect call), to show what the reading costs.
		s, texts := fixedFormattedSupply(1000000)
		at := time.Now()
		s.now = func() time.Time { return at }
		f := &FormattedSupply{s}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%len(texts) == 0 && i > 0 {
				b.StopTimer()
				s.publish(s.newTextBatch(texts, s.load().periodEnd))
				b.StartTimer()
			}
			if _, err := f.NextID(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AtomicAddInt64", func(b *testing.B) {
		var n int64
		for i := 0; i < b.N; i++ {
			atomic.AddInt64(&n, 1)
		}
	})
	b.Run("TryNextID", func(b *testing.B) {
		s := hugeSupply()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ok := s.TryNextID(); !ok {
				b.Fatal("spent")
			}
		}
	})
	b.Run("ClientNextID", func(b *testing.B) {
		// With the tag's lookup (a sync.Map read) on every call.
		s := hugeSupply()
		c := s.s.client
		c.segments.Store(&map[string]*supply{"bench": s.s})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := c.NextID(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("NextIDParallel", func(b *testing.B) {
		s := hugeSupply()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.NextID(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AtomicAddInt64Parallel", func(b *testing.B) {
		var n int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				atomic.AddInt64(&n, 1)
			}
		})
	})
}

// runFor runs loop in threads goroutines for d and returns the calls per second in total. Each
// goroutine calls step in chunks of 1024 between looks at the stop flag.
func runFor(threads int, d time.Duration, step func() error) (float64, error) {
	var stop atomic.Bool
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	started := time.Now()
	for g := 0; g < threads; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for !stop.Load() {
				for i := 0; i < 1024; i++ {
					if err := step(); err != nil {
						once.Do(func() { firstErr = err })
						stop.Store(true)
						break
					}
				}
				n += 1024
			}
			total.Add(n)
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(total.Load()) / time.Since(started).Seconds(), firstErr
}

// TestBenchSustained is bench.sh's sustained cases, skipped unless LEAFID_BENCH_URL names a
// running server: fresh clients with the default settings take ids of LEAFID_BENCH_TAG for
// LEAFID_BENCH_SECS from 1 and 4 goroutines, every fetch included, against atomic.AddInt64 on
// one shared int64 from as many goroutines for 1 s. It writes BENCH lines to LEAFID_BENCH_OUT.
func TestBenchSustained(t *testing.T) {
	url, outPath := os.Getenv("LEAFID_BENCH_URL"), os.Getenv("LEAFID_BENCH_OUT")
	if url == "" || outPath == "" {
		t.Skip("run by bench.sh: LEAFID_BENCH_URL and LEAFID_BENCH_OUT are not set")
	}
	tag := os.Getenv("LEAFID_BENCH_TAG")
	secs, err := strconv.ParseFloat(os.Getenv("LEAFID_BENCH_SECS"), 64)
	if err != nil || secs <= 0 {
		secs = 10
	}
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, threads := range []int{1, 4} {
		var counter int64
		baseline, _ := runFor(threads, time.Second, func() error { atomic.AddInt64(&counter, 1); return nil })
		c, err := New(Config{Servers: []string{url}})
		if err != nil {
			t.Fatal(err)
		}
		seg, err := c.Segment(tag)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		rate, err := runFor(threads, time.Duration(secs*float64(time.Second)), func() error {
			_, err := seg.NextID(ctx)
			return err
		})
		st := c.Stats()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "go sustained_%d: %d batches, batch size %d at the end\n", threads, st.Batches, st.BatchSize)
		fmt.Fprintf(out, `BENCH {"client":"go","case":"sustained_%d","ids_per_s":%.0f,"baseline_per_s":%.0f,"ratio":%.3f,"method":"%d goroutine(s) on one Client (defaults), Supply.NextID for %gs, every fetch included; baseline atomic.AddInt64 on one shared int64 from %d goroutine(s) for 1s"}`+"\n",
			threads, rate, baseline, rate/baseline, threads, secs, threads)
	}
}
