package leafid

// Caller tokens and quotas (issue 44) against scripted httptest servers: the header sent, the
// token never shown, leafid's 401/403 final, a proxy's 401 a failover, a 429 quota_exhausted
// waited out on the same server, one past the wait timeout a *ThrottledError. (The conformance
// suite's tokens scenario runs the same rules against real servers.)

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const secret = "lid_0123456789abcdefSECRET"

// reply is one scripted answer.
type reply struct {
	status     int
	retryAfter string
	body       string
}

func idsReply(first, last int64) reply {
	return reply{200, "", fmt.Sprintf(`{"biz_tag":"orders","count":%d,"ranges":[{"first":"%d","last":"%d"}]}`,
		last-first+1, first, last)}
}

func refusalReply(status int, retryAfter, code string) reply {
	return reply{status, retryAfter, fmt.Sprintf(`{"code":%q,"message":"%s here"}`, code, code)}
}

// fakeServer answers its replies in order (the last again) and records each Authorization.
type fakeServer struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newFake(t *testing.T, replies ...reply) *fakeServer {
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/health") {
			w.WriteHeader(200)
			return
		}
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		n := len(f.auth)
		f.mu.Unlock()
		if n > len(replies) {
			n = len(replies)
		}
		rep := replies[n-1]
		w.Header().Set("Content-Type", "application/json")
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write([]byte(rep.body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

func tokenClient(t *testing.T, wait time.Duration, servers ...*fakeServer) *Client {
	var urls []string
	for _, f := range servers {
		urls = append(urls, f.URL)
	}
	c, err := New(Config{Servers: urls, Batch: 10, MaxBatch: 10, WaitTimeout: wait,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTokenSentAndNeverShown(t *testing.T) {
	a := newFake(t, idsReply(1, 10))
	cfg := Config{Servers: []string{a.URL}, Token: secret}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, cfg); strings.Contains(s, secret) {
			t.Errorf("%s shows the token: %s", format, s)
		}
	}
	c := tokenClient(t, 2*time.Second, a)
	for _, format := range []string{"%v", "%+v", "%#v"} {
		if s := fmt.Sprintf(format, c); strings.Contains(s, secret) {
			t.Errorf("client %s shows the token: %s", format, s)
		}
	}
	if id, err := c.NextID(context.Background(), "orders"); err != nil || id != 1 {
		t.Fatalf("%d %v", id, err)
	}
	reqs := a.requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	for _, h := range reqs {
		if h != "Bearer "+secret {
			t.Errorf("Authorization %q", h)
		}
	}
	if _, err := New(Config{Servers: []string{a.URL}, Token: "two words"}); err == nil {
		t.Error("a token with a space was accepted")
	}
	// Without a token no header is sent.
	p := newFake(t, idsReply(1, 10))
	plain, err := New(Config{Servers: []string{p.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.NextID(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	if got := p.requests(); len(got) != 1 || got[0] != "" {
		t.Errorf("%q", got)
	}
}

func TestToken401And403AreFinalNoFailover(t *testing.T) {
	for _, k := range []struct {
		status int
		code   string
	}{{401, "unauthorized"}, {403, "forbidden"}} {
		a := newFake(t, refusalReply(k.status, "", k.code))
		b := newFake(t, idsReply(1, 10))
		c := tokenClient(t, 2*time.Second, a, b)
		_, err := c.NextID(context.Background(), "orders")
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Code != k.code || rej.Status != k.status {
			t.Fatalf("%s: %v", k.code, err)
		}
		if n := len(b.requests()); n != 0 {
			t.Errorf("%s: the next server was asked %d times", k.code, n)
		}
		if f := c.Stats().Failovers; f != 0 {
			t.Errorf("%s: %d failovers", k.code, f)
		}
		if _, err := c.NextSnowflakeID(context.Background()); !errors.As(err, &rej) {
			t.Errorf("%s: snowflake %v", k.code, err)
		}
	}
}

func TestTokenProxy401IsAFailover(t *testing.T) {
	a := newFake(t, reply{401, "", "<html>login</html>"})
	b := newFake(t, idsReply(1, 10))
	c := tokenClient(t, 2*time.Second, a, b)
	if id, err := c.NextID(context.Background(), "orders"); err != nil || id != 1 {
		t.Fatalf("%d %v", id, err)
	}
	if f := c.Stats().Failovers; f != 1 {
		t.Errorf("%d failovers", f)
	}
}

func TestQuotaExhaustedWaitsOnTheSameServer(t *testing.T) {
	a := newFake(t, refusalReply(429, "1", "quota_exhausted"), idsReply(1, 10))
	b := newFake(t, idsReply(1000, 1009))
	c := tokenClient(t, 5*time.Second, a, b)
	t0 := time.Now()
	if id, err := c.NextID(context.Background(), "orders"); err != nil || id != 1 {
		t.Fatalf("%d %v", id, err)
	}
	if took := time.Since(t0); took < 950*time.Millisecond || took > 4*time.Second {
		t.Errorf("took %v: Retry-After not honoured", took)
	}
	if n := len(a.requests()); n != 2 {
		t.Errorf("the same server asked %d times, want 2", n)
	}
	if n := len(b.requests()); n != 0 {
		t.Errorf("another server asked %d times", n)
	}
	if f := c.Stats().Failovers; f != 0 {
		t.Errorf("%d failovers", f)
	}
}

func TestQuotaExhaustedPastTheWaitIsThrottled(t *testing.T) {
	a := newFake(t, refusalReply(429, "3600", "quota_exhausted"))
	b := newFake(t, idsReply(1, 10))
	c := tokenClient(t, 2*time.Second, a, b)
	t0 := time.Now()
	_, err := c.NextID(context.Background(), "orders")
	var th *ThrottledError
	if !errors.As(err, &th) || th.Code != "quota_exhausted" || th.RetryAfter != time.Hour {
		t.Fatalf("%v", err)
	}
	if took := time.Since(t0); took > time.Second {
		t.Errorf("waited %v in vain", took)
	}
	if n := len(b.requests()); n != 0 {
		t.Errorf("another server asked %d times", n)
	}
	if f := c.Stats().Failovers; f != 0 {
		t.Errorf("%d failovers", f)
	}
	// A proxy's 429 (not leafid's code) stays a failover.
	p := newFake(t, refusalReply(429, "1", "rate_limited"))
	c2 := tokenClient(t, 2*time.Second, p, b)
	if _, err := c2.NextID(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	if f := c2.Stats().Failovers; f != 1 {
		t.Errorf("%d failovers", f)
	}
}
