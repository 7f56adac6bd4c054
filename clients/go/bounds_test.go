package leafid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// routeBounds asks the bounds route of base directly (the instants as written) and returns its
// min_id and max_id.
func routeBounds(t *testing.T, base, from, to string) (int64, int64) {
	t.Helper()
	q := url.Values{"from": {from}, "to": {to}, "stringify_ids": {"true"}}
	resp, err := http.Get(base + "/api/v1/snowflake/bounds?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct {
		MinID string `json:"min_id"`
		MaxID string `json:"max_id"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&b) != nil {
		t.Fatalf("the bounds route answered %d", resp.StatusCode)
	}
	lo, err1 := strconv.ParseInt(b.MinID, 10, 64)
	hi, err2 := strconv.ParseInt(b.MaxID, 10, 64)
	if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
		t.Fatalf("the route's bounds %q..%q", b.MinID, b.MaxID)
	}
	return lo, hi
}

const rfc3339Millis = "2006-01-02T15:04:05.000Z"

func TestSnowflakeBoundsAreTheRoutesAndHoldTheIdsOfTheirWindow(t *testing.T) {
	srv := startServer(t, database(t), 0)
	c := newClient(t, Config{Servers: []string{srv.URL}, Batch: 100})
	// A cached generator's ids may carry a tick a little ahead of or behind the call: a wide
	// window, so that only a wrong answer fails.
	from := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ids := take(t, 500, c.NextSnowflakeID)
	to := time.Now().Add(time.Minute).Truncate(time.Millisecond)

	b, err := c.SnowflakeBounds(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := routeBounds(t, srv.URL, from.UTC().Format(rfc3339Millis), to.UTC().Format(rfc3339Millis))
	if b.MinID != lo || b.MaxID != hi {
		t.Fatalf("client %+v, route %d..%d", b, lo, hi)
	}
	for _, id := range ids {
		if id < b.MinID || id > b.MaxID {
			t.Fatalf("id %d taken within the window lies outside %d..%d", id, b.MinID, b.MaxID)
		}
	}
	if b.Layout != "41/10/12" || !b.FirstTick.Equal(from) || !b.LastTick.Equal(to.Add(-time.Millisecond)) {
		t.Fatalf("%+v for %v..%v", b, from, to)
	}
	// Instants in another zone are the same instants.
	shanghai := time.FixedZone("UTC+8", 8*3600)
	if again, err := c.SnowflakeBounds(context.Background(), from.In(shanghai), to.In(shanghai)); err != nil ||
		again.MinID != lo || again.MaxID != hi {
		t.Fatalf("%+v %v", again, err)
	}
	// Between the milliseconds: from rounded down, to rounded up, so the range asked holds
	// [from, to): the route's answer for the whole milliseconds around them.
	sub, err := c.SnowflakeBounds(context.Background(), from.Add(500*time.Microsecond), to.Add(500*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi = routeBounds(t, srv.URL, from.UTC().Format(rfc3339Millis), to.Add(time.Millisecond).UTC().Format(rfc3339Millis))
	if sub.MinID != lo || sub.MaxID != hi {
		t.Fatalf("client %+v, route %d..%d", sub, lo, hi)
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestSnowflakeBoundsOfABadRangeAreRejectedWithoutFailover(t *testing.T) {
	db := database(t)
	a := startServer(t, db, 0)
	b := startServer(t, db, 0)
	c := newClient(t, Config{Servers: []string{a.URL, b.URL}})
	at := time.Now().Truncate(time.Millisecond)
	for _, r := range []struct {
		name     string
		from, to time.Time
	}{
		{"empty", at, at},
		{"empty between the milliseconds", at.Add(300 * time.Microsecond), at.Add(300 * time.Microsecond)},
		{"reversed", at.Add(time.Second), at},
		{"before the epoch", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"past the time field's end", at, time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, err := c.SnowflakeBounds(context.Background(), r.from, r.to)
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Code != "invalid_time_range" || rej.Status != http.StatusBadRequest ||
			rej.Server != a.URL || rej.Message == "" {
			t.Fatalf("%s: %+v, %v", r.name, got, err)
		}
	}
	if st := c.Stats(); st.Failovers != 0 || len(c.DownServers()) != 0 {
		t.Fatalf("a refusal is no failover: %+v, down %v", st, c.DownServers())
	}
}

func TestSnowflakeBoundsFailOverLikeBatches(t *testing.T) {
	db := database(t)
	off := startServer(t, db, 0, "LEAFID__SNOWFLAKE__ENABLED=false")
	on := startServer(t, db, 0)
	from, to := "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
	q := url.Values{"from": {from}, "to": {to}}
	resp, err := http.Get(off.URL + "/api/v1/snowflake/bounds?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || eb.Code != "engine_disabled" {
		t.Fatalf("the engine-disabled server answered %d %q", resp.StatusCode, eb.Code)
	}
	dead := closedPort(t)
	// Long backoffs: neither failed server is probed back up during the test.
	c := newClient(t, Config{Servers: []string{dead, off.URL, on.URL}, BackoffMin: 30 * time.Second, BackoffMax: 30 * time.Second})
	f, _ := time.Parse(time.RFC3339, "2026-01-01T00:00:00Z")
	b, err := c.SnowflakeBounds(context.Background(), f, f.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := routeBounds(t, on.URL, from, to)
	if b.MinID != lo || b.MaxID != hi {
		t.Fatalf("client %+v, route %d..%d", b, lo, hi)
	}
	// A closed port, then engine_disabled: two failovers; the server that answered is preferred.
	if st := c.Stats(); st.Failovers != 2 || c.PreferredServer() != on.URL || len(c.DownServers()) != 2 {
		t.Fatalf("%+v, preferred %s, down %v", st, c.PreferredServer(), c.DownServers())
	}
}

func TestMalformedBoundsAnswersAreThatServersFailure(t *testing.T) {
	srv := startServer(t, database(t), 0)
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	lo, hi := routeBounds(t, srv.URL, from.Format(rfc3339Millis), to.Format(rfc3339Millis))
	body := func(min, max string) string { return `{"min_id":` + min + `,"max_id":` + max + `,"layout":"41/10/12"}` }
	for i, bad := range []struct {
		status int
		body   string
	}{
		{200, `not json`},
		{200, `{}`},
		{200, body(`"1"`, `null`)},
		{200, body(`"00"`, `"5"`)},
		{200, body(`"-5"`, `"5"`)},
		{200, body(`"7"`, `"5"`)},
		{200, body(`"5"`, `"9223372036854775808"`)},
		{200, body(`"1.5"`, `"5"`)},
		{200, body(`"x"`, `"5"`)},
		{200, body(`true`, `"5"`)},
		{500, `{"code":"internal","message":"boom"}`},
		{503, `{"code":"snowflake_not_ready","message":"later"}`},
		{404, `{"code":"not_found","message":"no such route"}`},
		{400, `{"code":"some_other_code","message":"this server only"}`},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var asked atomic.Int64
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(bad.status)
				_, _ = w.Write([]byte(bad.body))
			}))
			defer fake.Close()
			c := newClient(t, Config{Servers: []string{fake.URL, srv.URL}, BackoffMin: 30 * time.Second, BackoffMax: 30 * time.Second})
			b, err := c.SnowflakeBounds(context.Background(), from, to)
			if err != nil || b.MinID != lo || b.MaxID != hi {
				t.Fatalf("%+v %v, want the real server's %d..%d", b, err, lo, hi)
			}
			if asked.Load() != 1 {
				t.Fatalf("the bad server was asked %d times", asked.Load())
			}
			if st := c.Stats(); st.Failovers != 1 {
				t.Fatalf("%+v", st)
			}
		})
	}
	// Any id the route may answer, up to 2^63-1, as a string; a JSON number is not what
	// stringify_ids=true asked for (vectors/responses.json).
	got, err := parseBounds([]byte(body(`"1"`, `"9223372036854775807"`)))
	if err != nil || got.MinID != 1 || got.MaxID != 9223372036854775807 || got.Layout != "41/10/12" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := parseBounds([]byte(body(`1`, `9223372036854775807`))); err == nil {
		t.Fatal("numbers accepted")
	}
	// A range in the layout's first tick starts at 0: a bound, never an id handed out.
	if got, err := parseBounds([]byte(body(`"0"`, `"5"`))); err != nil || got.MinID != 0 || got.MaxID != 5 {
		t.Fatalf("min_id 0: %+v %v", got, err)
	}
}

func TestSnowflakeBoundsWithEveryServerDownWaitThenNameTheLastFailure(t *testing.T) {
	dead := closedPort(t)
	c := newClient(t, Config{Servers: []string{dead}, WaitTimeout: 300 * time.Millisecond,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	at := time.Now()
	started := time.Now()
	_, err := c.SnowflakeBounds(context.Background(), at, at.Add(time.Second))
	waited := time.Since(started)
	var un *UnavailableError
	if !errors.As(err, &un) || un.Last == nil || un.Last.Server != dead || un.Last.Kind != FaultTransport {
		t.Fatalf("%#v", err)
	}
	if waited < 200*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("waited %v for a wait timeout of 300 ms", waited)
	}
	// The caller's context ends the wait; Close ends it too.
	slow := newClient(t, Config{Servers: []string{dead}, WaitTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := slow.SnowflakeBounds(ctx, at, at.Add(time.Second)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := slow.SnowflakeBounds(context.Background(), at, at.Add(time.Second))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	slow.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not end a waiting SnowflakeBounds")
	}
	if _, err := slow.SnowflakeBounds(context.Background(), at, at.Add(time.Second)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestBoundsInstantsAreUTCMillisecondsRoundedOutwards(t *testing.T) {
	at := time.Date(2026, 11, 27, 8, 0, 0, 123456789, time.FixedZone("UTC+8", 8*3600))
	if got := boundsInstant(at, false); got != "2026-11-27T00:00:00.123Z" {
		t.Fatal(got)
	}
	if got := boundsInstant(at, true); got != "2026-11-27T00:00:00.124Z" {
		t.Fatal(got)
	}
	whole := time.Date(2026, 11, 27, 0, 0, 1, 0, time.UTC)
	if got := boundsInstant(whole, true); got != "2026-11-27T00:00:01.000Z" {
		t.Fatal(got)
	}
	// The monotonic reading of time.Now is ignored; the instant is what counts.
	now := time.Now()
	if boundsInstant(now, false) != now.UTC().Truncate(time.Millisecond).Format(rfc3339Millis) {
		t.Fatal(boundsInstant(now, false))
	}
}
