// Command leafid-conformance is the Go client's conformance adapter: it reads the driver's
// commands (one JSON object a line on stdin), translates each into calls of the leafid package's
// public API and writes one JSON answer a line on stdout (clients/conformance/PROTOCOL.md).
// It implements no guarantee itself: every id and count it reports comes from the client.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	leafid "github.com/leafid/leafid/clients/go"
)

// command is any driver command; each op reads its own fields.
type command struct {
	Op             string   `json:"op"`
	Servers        []string `json:"servers"`
	Batch          int      `json:"batch"`
	MaxBatch       int      `json:"max_batch"`
	TargetLifetime int64    `json:"target_lifetime_ms"`
	RequestTimeout int64    `json:"request_timeout_ms"`
	WaitTimeout    int64    `json:"wait_timeout_ms"`
	BackoffMin     int64    `json:"backoff_min_ms"`
	BackoffMax     int64    `json:"backoff_max_ms"`
	Engine         string   `json:"engine"`
	Tag            string   `json:"tag"`
	Callers        int      `json:"callers"`
	PerCaller      int      `json:"per_caller"`
	PauseMs        int64    `json:"pause_ms"`
	// ClockOffset (open, optional): the client's period clock reads the system clock plus this.
	ClockOffset *int64 `json:"clock_offset_ms"`
	// Token (open, optional): the caller token the client sends.
	Token string `json:"token"`
	// From and To (bounds): RFC 3339 instants.
	From string `json:"from"`
	To   string `json:"to"`
}

// errorInfo is the protocol's error object.
type errorInfo struct {
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorCount is one group of the errors a take saw.
type errorCount struct {
	Kind  string `json:"kind"`
	Code  string `json:"code"`
	Count int    `json:"count"`
}

// classify maps a client error to the protocol's kind and code.
func classify(err error) errorInfo {
	var rej *leafid.RejectedError
	var th *leafid.ThrottledError
	var un *leafid.UnavailableError
	var inv *leafid.InvalidTagError
	var cfg *leafid.ConfigError
	switch {
	case errors.As(err, &rej):
		return errorInfo{"rejected", rej.Code, err.Error()}
	case errors.As(err, &th):
		return errorInfo{"throttled", th.Code, err.Error()}
	case errors.As(err, &un):
		return errorInfo{"unavailable", "", err.Error()}
	case errors.As(err, &inv):
		return errorInfo{"invalid_tag", "", err.Error()}
	case errors.As(err, &cfg):
		return errorInfo{"config", "", err.Error()}
	default:
		return errorInfo{"internal", "", err.Error()}
	}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// adapter holds the one client the driver opened.
type adapter struct {
	client *leafid.Client
}

func (a *adapter) open(c *command) map[string]any {
	if a.client != nil {
		a.client.Close()
		a.client = nil
	}
	var clock func() time.Time
	if c.ClockOffset != nil {
		offset := ms(*c.ClockOffset)
		clock = func() time.Time { return time.Now().Add(offset) }
	}
	client, err := leafid.New(leafid.Config{
		Clock:          clock,
		Servers:        c.Servers,
		Batch:          c.Batch,
		MaxBatch:       c.MaxBatch,
		TargetLifetime: ms(c.TargetLifetime),
		RequestTimeout: ms(c.RequestTimeout),
		WaitTimeout:    ms(c.WaitTimeout),
		Token:          leafid.Token(c.Token),
		BackoffMin:     ms(c.BackoffMin),
		BackoffMax:     ms(c.BackoffMax),
	})
	if err != nil {
		return fail(classify(err))
	}
	a.client = client
	return map[string]any{"ok": true}
}

func (a *adapter) take(c *command) map[string]any {
	if a.client == nil {
		return fail(errorInfo{"internal", "", "take before open"})
	}
	// next is one call of the client; ids are decimal strings, texts (formatted) as received.
	var next func(context.Context) (string, error)
	numeric := func(f func(context.Context) (int64, error)) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			id, err := f(ctx)
			if err != nil {
				return "", err
			}
			return strconv.FormatInt(id, 10), nil
		}
	}
	switch c.Engine {
	case "segment":
		tag := c.Tag
		next = numeric(func(ctx context.Context) (int64, error) { return a.client.NextID(ctx, tag) })
	case "snowflake":
		next = numeric(a.client.NextSnowflakeID)
	case "formatted":
		tag := c.Tag
		next = func(ctx context.Context) (string, error) { return a.client.NextFormatted(ctx, tag) }
	default:
		return fail(errorInfo{"internal", "", fmt.Sprintf("unknown engine %q", c.Engine)})
	}
	ids := make([][]string, c.Callers)
	errs := make([]map[[2]string]int, c.Callers)
	// slowest is each caller's longest single call (max_call_ms).
	slowest := make([]time.Duration, c.Callers)
	var wg sync.WaitGroup
	for g := 0; g < c.Callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			mine := make([]string, 0, c.PerCaller)
			seen := map[[2]string]int{}
			for i := 0; i < c.PerCaller; i++ {
				started := time.Now()
				id, err := next(context.Background())
				if took := time.Since(started); took > slowest[g] {
					slowest[g] = took
				}
				if err != nil {
					e := classify(err)
					key := [2]string{e.Kind, e.Code}
					if seen[key] == 0 {
						// For humans: the first error of each kind per caller, with the
						// client's view of the servers.
						fmt.Fprintf(os.Stderr, "leafid-conformance: caller %d call %d: %s: %v (down: %v, preferred: %s, stats: %+v)\n",
							g, i, e.Kind, err, a.client.DownServers(), a.client.PreferredServer(), a.client.Stats())
					}
					seen[key]++
				} else {
					mine = append(mine, id)
				}
				if c.PauseMs > 0 {
					time.Sleep(ms(c.PauseMs))
				}
			}
			ids[g], errs[g] = mine, seen
		}(g)
	}
	wg.Wait()
	total := map[[2]string]int{}
	var order [][2]string
	for _, m := range errs {
		for k, n := range m {
			if _, ok := total[k]; !ok {
				order = append(order, k)
			}
			total[k] += n
		}
	}
	groups := make([]errorCount, 0, len(order))
	for _, k := range order {
		groups = append(groups, errorCount{k[0], k[1], total[k]})
	}
	var longest time.Duration
	for _, d := range slowest {
		if d > longest {
			longest = d
		}
	}
	return map[string]any{"ok": true, "ids": ids, "errors": groups,
		"max_call_ms": float64(longest) / float64(time.Millisecond)}
}

// bounds answers the client's snowflake bounds of [from, to).
func (a *adapter) bounds(c *command) map[string]any {
	if a.client == nil {
		return fail(errorInfo{"internal", "", "bounds before open"})
	}
	from, err := time.Parse(time.RFC3339Nano, c.From)
	if err != nil {
		return fail(errorInfo{"internal", "", "bounds: from: " + err.Error()})
	}
	to, err := time.Parse(time.RFC3339Nano, c.To)
	if err != nil {
		return fail(errorInfo{"internal", "", "bounds: to: " + err.Error()})
	}
	b, err := a.client.SnowflakeBounds(context.Background(), from, to)
	if err != nil {
		fmt.Fprintf(os.Stderr, "leafid-conformance: bounds %s..%s: %v\n", c.From, c.To, err)
		return fail(classify(err))
	}
	return map[string]any{"ok": true, "min_id": strconv.FormatInt(b.MinID, 10), "max_id": strconv.FormatInt(b.MaxID, 10)}
}

func (a *adapter) stats() map[string]any {
	if a.client == nil {
		return fail(errorInfo{"internal", "", "stats before open"})
	}
	st := a.client.Stats()
	return map[string]any{"ok": true, "ids_served": st.IDsServed, "batches": st.Batches,
		"failovers": st.Failovers, "discarded_ids": st.DiscardedIDs, "batch_size": st.BatchSize}
}

func fail(e errorInfo) map[string]any {
	return map[string]any{"ok": false, "error": e}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	answer := func(v map[string]any) {
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(fail(errorInfo{"internal", "", err.Error()}))
		}
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	a := &adapter{}
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			answer(fail(errorInfo{"internal", "", "bad command: " + err.Error()}))
			continue
		}
		switch c.Op {
		case "open":
			answer(a.open(&c))
		case "take":
			answer(a.take(&c))
		case "bounds":
			answer(a.bounds(&c))
		case "stats":
			answer(a.stats())
		case "close":
			if a.client != nil {
				a.client.Close()
			}
			answer(map[string]any{"ok": true})
			os.Exit(0)
		default:
			answer(fail(errorInfo{"internal", "", fmt.Sprintf("unknown op %q", c.Op)}))
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "leafid-conformance: reading stdin:", err)
	}
	if a.client != nil {
		a.client.Close()
	}
}
