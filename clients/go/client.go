// Package leafid is the Go client of leafid, a Leaf-segment and snowflake id server.
//
// A Client keeps, per biz tag (and for snowflake), two local batches of ids fetched as ranges
// (runs of consecutive ids) from GET /api/v1/segment/{tag}/ranges (GET /api/v1/snowflake/ranges),
// so NextID is almost always one atomic add and one compare on local memory. The next batch is
// fetched in the background once 10% of the current one is used (one fetch at a time per tag),
// and its size follows demand: a batch should last Config.TargetLifetime. Batches come from several servers with
// failover: a server that fails or times out is skipped at once and probed on /health/ready with
// exponential backoff until it answers 200.
//
// Guarantees, per client: only ids received in a valid 200 body are handed out; no id is handed
// out twice; ids of one tag (and of snowflake) strictly increase across all goroutines (a call
// that starts after another returned gets a larger id); ids are exact int64 values.
//
// Formatted tags (ids that are text, such as daily order numbers) have a supply of their own,
// Client.NextFormatted and Client.Formatted: batches of texts from GET
// /api/v1/segment/{tag}/ids, each with its period's end; a text is never handed out once the
// client's wall clock has passed its batch's period_end, and texts strictly increase as byte
// strings.
//
// A permuted tag's answers say "ordered": false: their texts are handed out in the order
// received, without the byte-order check and the floor (uniqueness is the server's); the
// period rule still holds. Config.Clock is the wall clock of the period rule (default
// time.Now).
//
// Client.SnowflakeBounds gives the smallest and largest snowflake id of a time range (GET
// /api/v1/snowflake/bounds), for WHERE id BETWEEN min AND max, with the same failover.
//
// Layout: client.go (Config, New, Client, Supply, Stats), supply.go (the double buffer and its
// floor), formatted.go (the formatted supply), bounds.go (SnowflakeBounds), servers.go
// (failover, validation, health probes), errors.go (the typed errors).
package leafid

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxBatch is the most ids one segment range request may ask for (the server's limit).
const MaxBatch = 1000000

// MaxSnowflakeBatch is the most ids one snowflake range request may ask for (the server's
// limit): a snowflake supply never asks for more, whatever Config.MaxBatch says.
const MaxSnowflakeBatch = 100000

// Defaults of the Config fields left at zero.
const (
	DefaultBatch          = 1000
	DefaultMaxBatch       = MaxBatch
	DefaultTargetLifetime = time.Second
	DefaultRequestTimeout = 2 * time.Second
	DefaultWaitTimeout    = 5 * time.Second
	DefaultBackoffMin     = 50 * time.Millisecond
	DefaultBackoffMax     = 5 * time.Second
)

// Config is what New builds a Client from. Zero fields take the defaults above.
type Config struct {
	// Servers are the base URLs (http://host:port) of leafid servers of one database. The first
	// is asked first; after a failover the server that last delivered is asked first. Required.
	Servers []string
	// Batch is the ids a supply asks for in its first request and the least it ever asks for,
	// for every tag and for snowflake, 1..=MaxBatch (default 1000; a snowflake supply asks for
	// at most MaxSnowflakeBatch). The size then follows demand up to MaxBatch. Each supply holds
	// up to two batches; ids still local when the client is closed are never used (a gap, as a
	// server restart makes).
	Batch int
	// MaxBatch is the most ids a supply asks for in one request as demand grows, Batch..=MaxBatch
	// (default MaxBatch, a million; snowflake at most MaxSnowflakeBatch). A restart wastes at
	// most twice the size in use.
	MaxBatch int
	// TargetLifetime is how long a batch should last at the rate the callers take ids (default
	// 1 s): the size doubles when a batch would last under half of it (or a caller had to wait
	// for ids) and halves when it would last over twice as long.
	TargetLifetime time.Duration
	// RequestTimeout bounds one batch request or health probe, connect to last byte (default
	// 2 s); a server that takes longer is marked down and the next one asked.
	RequestTimeout time.Duration
	// WaitTimeout is the longest NextID waits for ids when the local ones are spent (default
	// 5 s); then it returns an *UnavailableError.
	WaitTimeout time.Duration
	// Token is the caller token (lid_..., made by an admin with POST /api/v1/tokens), sent as
	// "Authorization: Bearer <token>" on every batch and bounds request (not on the health probe,
	// which needs none). Empty: no credentials (a server in open mode). Printing a Config or a
	// Client never shows it (Token's String and GoString redact it). leafid's 401 unauthorized
	// and 403 forbidden are a *RejectedError with that code, never a failover (every server
	// reads the same tokens); a 429 quota_exhausted is waited out for its Retry-After on the
	// same server, or is a *ThrottledError when that wait would pass WaitTimeout.
	Token Token
	// BackoffMin and BackoffMax bound the health probes of a down server: the first comes
	// BackoffMin after the failure, the wait doubling with each failure up to BackoffMax
	// (defaults 50 ms and 5 s).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Clock is the wall clock of the period rule: a formatted supply compares it with its
	// batch's period_end right before it hands out a text, and drops a batch whose period has
	// ended by it (never yesterday's number today). Nil: time.Now, called directly. It is called
	// once per formatted NextID, from any goroutine at once, so it must be cheap and safe for
	// concurrent use. Set it to follow a clock of your own (a host whose wall clock is known to
	// be off, a test); it is used for nothing else (request timeouts, backoff and the demand rule
	// measure elapsed time on the monotonic clock).
	Clock func() time.Time
}

// Client hands out ids from local batches. Safe for concurrent use. Close it when done: it stops
// every goroutine, timer and connection it started.
type Client struct {
	// cfg is the validated configuration, defaults applied.
	cfg Config
	// servers does failover and health.
	servers *servers
	// transport is the client's own connection pool, closed by Close.
	transport *http.Transport
	// segments maps a tag to its supply: one per tag, so every caller of a tag shares one
	// increasing stream. Copied on write under newSegment and never changed once published, so
	// a lookup is one atomic load and a map read: no lock, no allocation (a sync.Map's any key
	// would allocate the tag's interface on every call).
	segments atomic.Pointer[map[string]*supply]
	// formatted maps a formatted tag to its supply (Formatted), copied on write as segments.
	formatted atomic.Pointer[map[string]*formattedSupply]
	// newSegment serialises the creation of a tag's supply (segment or formatted).
	newSegment sync.Mutex
	// snowflake is the snowflake supply.
	snowflake *supply
	// stop is cancelled by Close: refills, requests and probes end.
	stop       context.Context
	cancelStop context.CancelFunc
	// closed is set by Close (under mu); nextID checks it first.
	closed atomic.Bool
	// mu orders spawn against Close, so no goroutine starts after Close waited.
	mu sync.Mutex
	// wg counts the background goroutines (health loop, refills).
	wg sync.WaitGroup
}

// Supply is the id stream of one tag (from Client.Segment) or of snowflake (Client.Snowflake).
// Every Supply of one tag from one client shares the same stream.
type Supply struct {
	s *supply
}

// Stats are a client's counters, summed over its supplies.
type Stats struct {
	// IDsServed counts ids handed to callers.
	IDsServed uint64
	// Batches counts 200 answers whose ids were taken into a local buffer.
	Batches uint64
	// Failovers counts requests that went to another server because the one asked failed.
	Failovers uint64
	// DiscardedIDs counts ids received in 200 answers but never handed out because they were
	// not above the supply's last id (a lagging server after a failover).
	DiscardedIDs uint64
	// IDsReceived counts ids received in valid 200 answers, discarded ones included.
	IDsReceived uint64
	// BatchSize is the largest size any supply will ask for in its next request.
	BatchSize int
}

// New validates cfg and builds a client. No request is sent until the first NextID; the health
// loop starts at once.
func New(cfg Config) (*Client, error) {
	if len(cfg.Servers) == 0 {
		return nil, &ConfigError{"no server given"}
	}
	for _, b := range []byte(cfg.Token) {
		if b <= ' ' || b > '~' {
			return nil, &ConfigError{"the token must be printable ASCII without spaces"}
		}
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Batch < 1 || cfg.Batch > MaxBatch {
		return nil, &ConfigError{fmt.Sprintf("batch must be within 1..=%d (got %d)", MaxBatch, cfg.Batch)}
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatch < cfg.Batch || cfg.MaxBatch > MaxBatch {
		return nil, &ConfigError{fmt.Sprintf("max batch must be within the batch and %d, %d..=%d (got %d)", MaxBatch, cfg.Batch, MaxBatch, cfg.MaxBatch)}
	}
	for _, d := range []struct {
		name  string
		field *time.Duration
		def   time.Duration
	}{
		{"target lifetime", &cfg.TargetLifetime, DefaultTargetLifetime},
		{"request timeout", &cfg.RequestTimeout, DefaultRequestTimeout},
		{"wait timeout", &cfg.WaitTimeout, DefaultWaitTimeout},
		{"backoff min", &cfg.BackoffMin, DefaultBackoffMin},
		{"backoff max", &cfg.BackoffMax, DefaultBackoffMax},
	} {
		if *d.field < 0 {
			return nil, &ConfigError{fmt.Sprintf("%s must not be negative (got %v)", d.name, *d.field)}
		}
		if *d.field == 0 {
			*d.field = d.def
		}
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, &ConfigError{fmt.Sprintf("backoff max %v is below backoff min %v", cfg.BackoffMax, cfg.BackoffMin)}
	}
	bases := make([]string, 0, len(cfg.Servers))
	for _, raw := range cfg.Servers {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, &ConfigError{fmt.Sprintf("not an http://host:port URL: %q", raw)}
		}
		bases = append(bases, strings.TrimRight(raw, "/"))
	}
	cfg.Servers = bases
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.RequestTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.RequestTimeout,
		DisableCompression:    true,
	}
	c := &Client{
		cfg:       cfg,
		transport: transport,
		servers:   newServers(bases, &http.Client{Transport: transport}, cfg.RequestTimeout, cfg.BackoffMin, cfg.BackoffMax),
	}
	c.servers.wait = cfg.WaitTimeout
	if cfg.Token != "" {
		auth := "Bearer " + string(cfg.Token)
		c.servers.authorization = &auth
		// The client keeps it only behind a pointer (servers.authorization): a Client printed
		// with %+v shows cfg's fields as they are, methods aside.
		c.cfg.Token = ""
	}
	c.stop, c.cancelStop = context.WithCancel(context.Background())
	c.segments.Store(&map[string]*supply{})
	c.formatted.Store(&map[string]*formattedSupply{})
	c.snowflake = newSupply(c, &request{route: "/api/v1/snowflake/ranges", limit: MaxSnowflakeBatch},
		minInt(cfg.Batch, MaxSnowflakeBatch), minInt(cfg.MaxBatch, MaxSnowflakeBatch))
	c.spawn(c.servers.healthLoop)
	return c, nil
}

// NextID returns the next id of tag: from the local batch, or after waiting (at most the wait
// timeout, and as long as ctx allows) for the next one. Errors: *InvalidTagError,
// *RejectedError, *UnavailableError, ctx.Err(), ErrClosed.
func (c *Client) NextID(ctx context.Context, tag string) (int64, error) {
	if s := (*c.segments.Load())[tag]; s != nil {
		return s.nextID(ctx)
	}
	sup, err := c.Segment(tag)
	if err != nil {
		return 0, err
	}
	return sup.NextID(ctx)
}

// NextSnowflakeID returns the next snowflake id (see NextID).
func (c *Client) NextSnowflakeID(ctx context.Context) (int64, error) {
	return c.snowflake.nextID(ctx)
}

// Segment returns the supply of tag (the same stream on every call for that tag), or an
// *InvalidTagError. No request is sent until its first NextID.
func (c *Client) Segment(tag string) (*Supply, error) {
	if s := (*c.segments.Load())[tag]; s != nil {
		return &Supply{s}, nil
	}
	if !ValidTag(tag) {
		return nil, &InvalidTagError{Tag: tag}
	}
	c.newSegment.Lock()
	defer c.newSegment.Unlock()
	old := *c.segments.Load()
	if s := old[tag]; s != nil {
		return &Supply{s}, nil
	}
	s := newSupply(c, &request{route: "/api/v1/segment/" + tag + "/ranges", tag: tag, limit: MaxBatch},
		c.cfg.Batch, c.cfg.MaxBatch)
	m := make(map[string]*supply, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[tag] = s
	c.segments.Store(&m)
	return &Supply{s}, nil
}

// Snowflake returns the snowflake supply (one per client).
func (c *Client) Snowflake() *Supply {
	return &Supply{c.snowflake}
}

// NextID returns the supply's next id (see Client.NextID). From a local batch it costs one
// atomic add and one compare.
func (s *Supply) NextID(ctx context.Context) (int64, error) {
	return s.s.nextID(ctx)
}

// TryNextID returns an id if a local batch holds one, else false at once: it never waits, never
// sends a request itself and never fails (false also after Close). A spent batch, or the
// preload mark, starts the background refill, so a later call may succeed.
func (s *Supply) TryNextID() (int64, bool) {
	return s.s.tryNextID()
}

// Stats returns the client's counters. Exact when no call is running; a snapshot otherwise.
func (c *Client) Stats() Stats {
	var st Stats
	c.snowflake.stats(&st)
	for _, s := range *c.segments.Load() {
		s.stats(&st)
	}
	for _, s := range *c.formatted.Load() {
		s.stats(&st)
	}
	st.Failovers = c.servers.failovers.Load()
	return st
}

// PreferredServer returns the base URL of the server asked first (the last that delivered).
func (c *Client) PreferredServer() string {
	s := c.servers
	return s.list[int(s.preferred.Load())%len(s.list)].base
}

// DownServers returns the base URLs of the servers marked down.
func (c *Client) DownServers() []string {
	return c.servers.downList()
}

// Close stops the client: running requests are cancelled, waiting NextID calls return
// ErrClosed, and Close returns once every goroutine it started has ended and its connections are
// closed. Later calls return ErrClosed. Closing twice is harmless.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	c.closed.Store(true)
	c.cancelStop()
	c.mu.Unlock()
	// After this, a call takes the slow path, which sees closed: no id is handed out by a call
	// that starts after Close returned.
	c.snowflake.close()
	c.newSegment.Lock()
	for _, s := range *c.segments.Load() {
		s.close()
	}
	for _, s := range *c.formatted.Load() {
		s.close()
	}
	c.newSegment.Unlock()
	c.wg.Wait()
	c.transport.CloseIdleConnections()
	return nil
}

// spawn runs f in a goroutine counted by Close, unless the client is closed.
func (c *Client) spawn(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.stop)
	}()
	return true
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// ValidTag reports whether tag is 1 to 128 characters of A-Z a-z 0-9 . _ : - (the server's rule).
func ValidTag(tag string) bool {
	if len(tag) < 1 || len(tag) > 128 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		ch := tag[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9',
			ch == '.', ch == '_', ch == ':', ch == '-':
		default:
			return false
		}
	}
	return true
}
