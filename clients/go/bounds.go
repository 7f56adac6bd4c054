package leafid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Bounds are the smallest and largest snowflake id any worker can issue in a time range under
// the servers' layout (Client.SnowflakeBounds): select a range's rows with
// WHERE id BETWEEN MinID AND MaxID.
type Bounds struct {
	// MinID is the first id of the tick that holds the range's start (worker and sequence 0).
	MinID int64
	// MaxID is the last id of the last tick that starts before the range's end (worker and
	// sequence at their maximum).
	MaxID int64
	// Layout is the servers' layout as the answer named it (e.g. "41/10/12"); empty if absent.
	Layout string
	// FirstTick and LastTick are the first and the last tick the bounds hold, as the answer
	// gave them (zero if absent or not an RFC 3339 instant: informative only).
	FirstTick, LastTick time.Time
}

// boundsBody is the 200 body of the bounds route (stringify_ids=true: the ids as decimal
// strings).
type boundsBody struct {
	MinID     *string `json:"min_id"`
	MaxID     *string `json:"max_id"`
	Layout    *string `json:"layout"`
	FirstTick *string `json:"first_tick"`
	LastTick  *string `json:"last_tick"`
}

// SnowflakeBounds asks the servers for the smallest and largest snowflake id any worker can
// issue in [from, to) (GET /api/v1/snowflake/bounds), for WHERE id BETWEEN MinID AND MaxID.
// The instants are sent as RFC 3339 UTC with milliseconds, from rounded down and to rounded up
// to the millisecond (when from is before to), so the range asked holds [from, to).
//
// It fails over as batch requests do: the preferred server first, a timeout, a 5xx, a refused
// connection, a 4xx of that server alone (engine_disabled, not_found...) or a 200 that is not
// a valid answer (ids not 0 < id <= 2^63-1, min above max) sends it to the next server at
// once; failed rounds are retried with backoff for at most Config.WaitTimeout. Errors:
// *RejectedError with code invalid_time_range (an empty range, one before the layout's epoch
// or past the end of its time field; no failover) or invalid_request, *UnavailableError (no
// server answered within the wait), ctx.Err(), ErrClosed.
func (c *Client) SnowflakeBounds(ctx context.Context, from, to time.Time) (Bounds, error) {
	if c.closed.Load() {
		return Bounds{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return Bounds{}, err
	}
	// Requests end when the caller's context does or when the client is closed.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	qFrom, qTo := boundsInstants(from, to)
	query := url.Values{"from": {qFrom}, "to": {qTo}, "stringify_ids": {"true"}}
	path := "/api/v1/snowflake/bounds?" + query.Encode()
	started := time.Now()
	deadline := started.Add(c.cfg.WaitTimeout)
	var last *ServerFault
	for failures := 1; ; failures++ {
		var got Bounds
		srv, rejected, fault := c.servers.call(ctx, func(ctx context.Context, srv *server) (error, *ServerFault) {
			body, rejected, fault := c.servers.get(ctx, srv, srv.base+path)
			if rejected != nil || fault != nil {
				return rejected, fault
			}
			var err error
			if got, err = parseBounds(body); err != nil {
				return nil, srv.fault(FaultBadResponse, 0, "", err.Error())
			}
			return nil, nil
		})
		switch {
		case srv != nil:
			return got, nil
		case rejected != nil:
			return Bounds{}, rejected
		}
		if fault != nil {
			last = fault
		}
		if ctx.Err() != nil {
			if c.stop.Err() != nil {
				return Bounds{}, ErrClosed
			}
			return Bounds{}, ctx.Err()
		}
		wait := c.servers.backoff(failures)
		if !time.Now().Add(wait).Before(deadline) {
			return Bounds{}, &UnavailableError{Waited: time.Since(started), Last: last}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// boundsInstants are the query's from and to for [from, to): from rounded down to the
// millisecond, to rounded up when from is before to (down otherwise: an empty range stays
// empty). Every tick that overlaps the range is kept, as the server keeps them
// (clients/conformance/vectors/bounds.json).
func boundsInstants(from, to time.Time) (string, string) {
	return boundsInstant(from, false), boundsInstant(to, from.Before(to))
}

// boundsInstant writes t as RFC 3339 UTC with milliseconds and Z, rounded down, or up if up.
func boundsInstant(t time.Time, up bool) string {
	t = t.Round(0).UTC()
	ms := t.Truncate(time.Millisecond)
	if up && ms.Before(t) {
		ms = ms.Add(time.Millisecond)
	}
	return ms.Format("2006-01-02T15:04:05.000Z")
}

// parseBounds reads a 200 body of the bounds route. It is an answer only if min_id and max_id
// are exact int64 values with 0 < min_id <= max_id; anything else is the server's fault.
func parseBounds(body []byte) (Bounds, error) {
	var b boundsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return Bounds{}, fmt.Errorf("not a bounds body: %v", err)
	}
	if b.MinID == nil || b.MaxID == nil {
		return Bounds{}, errors.New("no min_id or max_id in the body")
	}
	// A range that starts in the layout's first tick has min_id 0 (worker 0, sequence 0): a
	// bound, not an id handed out, so 0 is accepted here and nowhere else.
	lo := int64(0)
	if *b.MinID != "0" {
		var err error
		if lo, err = parseID(b.MinID); err != nil {
			return Bounds{}, fmt.Errorf("min_id: %v", err)
		}
	}
	hi, err := parseID(b.MaxID)
	if err != nil {
		return Bounds{}, fmt.Errorf("max_id: %v", err)
	}
	if hi < lo {
		return Bounds{}, fmt.Errorf("max_id %d is below min_id %d", hi, lo)
	}
	out := Bounds{MinID: lo, MaxID: hi}
	if b.Layout != nil {
		out.Layout = *b.Layout
	}
	if b.FirstTick != nil {
		out.FirstTick, _ = time.Parse(time.RFC3339Nano, *b.FirstTick)
	}
	if b.LastTick != nil {
		out.LastTick, _ = time.Parse(time.RFC3339Nano, *b.LastTick)
	}
	return out, nil
}
