package leafid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// permutedFormat is the conformance scenario's permuted code: T- and 6 Crockford base-32
// digits, a keyed permutation (FF1) of the sequence under the key "conformance".
const permutedFormat = `{"prefix":"T-","radix":"crockford32","width":6,"permute":{"key_id":"conformance"}}`

var permutedText = regexp.MustCompile(`^T-[0-9A-HJKMNP-TV-Z]{6}$`)

// permuteKey writes a fresh 32-byte key (64 hex characters, mode 0600) and returns the server
// setting that names it "conformance".
func permuteKey(t *testing.T) string {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "conformance.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return "LEAFID__SHAPES__KEYS__CONFORMANCE=" + path
}

// A permuted tag on real servers: its answers say "ordered": false, and the supply hands the
// texts out as received: every text of the format, none twice across callers and a server
// killed (-9), nothing discarded (a floor would cut most of them), a caller's texts not in
// byte order; and the period rule still holds for them.
func TestAPermutedTagsCodesAreHandedOutAsReceived(t *testing.T) {
	key := permuteKey(t)
	db := database(t)
	a := startServer(t, db, 0, key)
	b := startServer(t, db, 0, key)
	createFormattedTag(t, a.URL, "codes", 200, permutedFormat)
	var late atomic.Bool
	var end time.Time
	// MaxBatch 50: a grown batch could hold the rest before the kill and no request would fail over.
	c := newClient(t, Config{Servers: []string{a.URL, b.URL}, Batch: 50, MaxBatch: 50, RequestTimeout: 500 * time.Millisecond,
		WaitTimeout: 500 * time.Millisecond, BackoffMin: 10 * time.Millisecond,
		Clock: func() time.Time {
			if late.Load() {
				return end.Add(time.Second)
			}
			return time.Now()
		}})
	const callers, per = 4, 500
	got := make([][]string, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if g == 0 && i == per/2 {
					a.kill()
				}
				text, err := c.NextFormatted(context.Background(), "codes")
				if err != nil {
					errs <- err
					return
				}
				got[g] = append(got[g], text)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for g, texts := range got {
		for _, x := range texts {
			if seen[x] || !permutedText.MatchString(x) {
				t.Fatalf("%q twice or not a code of the format", x)
			}
			seen[x] = true
		}
		if sort.StringsAreSorted(texts) {
			t.Fatalf("caller %d's %d codes came sorted: %q...", g, len(texts), texts[:3])
		}
	}
	st := c.Stats()
	if st.IDsServed != callers*per || st.DiscardedIDs != 0 || st.Failovers < 1 {
		t.Fatalf("%+v", st)
	}
	// The period rule: a permuted tag never resets (its period ends at the end of time), but a
	// clock past that end still drops what the client holds.
	f, _ := c.Formatted("codes")
	f.s.mu.Lock()
	end = f.s.load().periodEnd
	f.s.mu.Unlock()
	if end.IsZero() {
		t.Fatal("no period_end")
	}
	late.Store(true)
	if text, ok := f.TryNextID(); ok {
		t.Fatalf("TryNextID handed out %q after its period ended", text)
	}
	if text, err := f.NextID(context.Background()); !errors.As(err, new(*UnavailableError)) {
		t.Fatalf("NextID after the period ended: %q, %v", text, err)
	}
	if st := c.Stats(); st.IDsServed != callers*per || st.DiscardedIDs == 0 {
		t.Fatalf("%+v", st)
	}
}
