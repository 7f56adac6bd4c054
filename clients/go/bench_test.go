package leafid

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixedSupply is a supply of the ids 1..=n that never fetches: the local path alone.
func fixedSupply(n int) *supply {
	c := &Client{}
	c.stop, c.cancelStop = context.WithCancel(context.Background())
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return newSupply(c, nil, ids)
}

func TestAFixedSupplyHandsOutItsIdsOnceThenWaitsInVain(t *testing.T) {
	s := fixedSupply(3)
	s.client.cfg.WaitTimeout = 50 * time.Millisecond
	for want := int64(1); want <= 3; want++ {
		if id, err := s.nextID(context.Background()); err != nil || id != want {
			t.Fatalf("got %d, %v; want %d", id, err, want)
		}
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

// fedSupply is a supply whose next batch (the same 1<<20 ids each time) is put in place by a
// goroutine whenever it is missing, as a refill that always keeps up would: NextID then runs its
// real fast path and promotions. stop ends the feeder.
func fedSupply() (s *supply, stop func()) {
	const chunk = 1 << 20
	s = fixedSupply(chunk)
	s.client.cfg.WaitTimeout = 10 * time.Second
	ids := s.current.Load().ids
	done := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			s.mu.Lock()
			if s.next == nil {
				s.next = newBatch(ids)
				close(s.wake)
				s.wake = make(chan struct{})
			}
			s.mu.Unlock()
		}
	}()
	return s, func() { close(done); <-fed }
}

// BenchmarkLocal compares NextID served from local batches with a bare atomic.AddInt64, from one
// goroutine and from GOMAXPROCS goroutines.
func BenchmarkLocal(b *testing.B) {
	ctx := context.Background()
	b.Run("NextID", func(b *testing.B) {
		s, stop := fedSupply()
		defer stop()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.nextID(ctx); err != nil {
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
	b.Run("NextIDParallel", func(b *testing.B) {
		s, stop := fedSupply()
		defer stop()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.nextID(ctx); err != nil {
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

// benchServerBinary is $LEAFID_BIN, else the release server if built, else the debug one.
func benchServerBinary(b *testing.B) string {
	if p := os.Getenv("LEAFID_BIN"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../../target/release/leafid"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return serverBinary(b)
}

// BenchmarkSustained measures ids/s of one caller taking segment (and snowflake) ids through a
// client from one real server on SQLite, for a few batch sizes.
func BenchmarkSustained(b *testing.B) {
	bin := benchServerBinary(b)
	b.Setenv("LEAFID_BIN", bin)
	b.Logf("server: %s", bin)
	srv := startServer(b, database(b), 0, "LEAFID__SERVER__WORKERS=0")
	createTag(b, srv.URL, "bench", 100000, "")
	for _, batch := range []int{1000, 10000, 100000} {
		for _, engine := range []string{"segment", "snowflake"} {
			b.Run(fmt.Sprintf("%s/batch=%d", engine, batch), func(b *testing.B) {
				c, err := New(Config{Servers: []string{srv.URL}, Batch: batch, WaitTimeout: 30 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				next := c.NextSnowflakeID
				if engine == "segment" {
					seg, err := c.Segment("bench")
					if err != nil {
						b.Fatal(err)
					}
					next = seg.NextID
				}
				ctx := context.Background()
				// The first batch outside the timing.
				if _, err := next(ctx); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				started := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := next(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/time.Since(started).Seconds(), "ids/s")
				b.ReportMetric(float64(c.Stats().Batches), "batches")
			})
		}
	}
}
