package leafid

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned by every call on a client after Close.
var ErrClosed = errors.New("leafid: client closed")

// InvalidTagError: the tag is not 1 to 128 characters of A-Z a-z 0-9 . _ : - (the server's
// rule). No request was sent.
type InvalidTagError struct {
	// Tag is the refused tag.
	Tag string
}

func (e *InvalidTagError) Error() string {
	return fmt.Sprintf("leafid: invalid biz tag %q: 1 to 128 of A-Z a-z 0-9 . _ : -", e.Tag)
}

// ConfigError: New refused its Config (no server, a URL that is not http://host:port, a batch
// outside 1..=MaxBatch, a max batch below the batch, a bad timeout, lifetime or backoff).
type ConfigError struct {
	// Reason says which setting and why.
	Reason string
}

func (e *ConfigError) Error() string { return "leafid: invalid configuration: " + e.Reason }

// RejectedError: a server refused the request itself with a 4xx whose code holds on every server
// (they share one database): unknown_biz_tag, invalid_biz_tag, biz_tag_exhausted, invalid_count,
// invalid_request, formatted_tag; for a formatted supply also not_formatted (a plain tag's 200)
// and sequence_exhausted (a 503); for SnowflakeBounds invalid_time_range; and the caller token
// refused by leafid: 401 unauthorized (missing, unknown or revoked) and 403 forbidden (not scoped
// to the tag), since every server reads the same tokens. No other server was asked. (A proxy's
// 401/403/429 without leafid's code is that server's failure: the next server is asked.)
type RejectedError struct {
	// Server is the base URL of the server that answered.
	Server string
	// Status is the HTTP status (400, 404, 409...).
	Status int
	// Code is the body's stable code, e.g. "unknown_biz_tag".
	Code string
	// Message is the body's human-readable message.
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("leafid: %s refused the request (%d %s): %s", e.Server, e.Status, e.Code, e.Message)
}

// ThrottledError: the caller token's quota is spent. leafid answered 429 quota_exhausted (the
// token's rate for now, or a formatted tag's share of its period) with a Retry-After that ends
// past the wait timeout. A shorter Retry-After is waited out by the client, which then asks the
// same server again: every server shares the quota, so the client never fails over for it.
type ThrottledError struct {
	// Server is the base URL of the server that answered.
	Server string
	// Status is the HTTP status (429).
	Status int
	// Code is the body's stable code, "quota_exhausted".
	Code string
	// Message is the body's human-readable message.
	Message string
	// RetryAfter is the server's Retry-After: when asking again may succeed.
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("leafid: %s throttled the request (%d %s, retry after %v): %s", e.Server, e.Status, e.Code,
		e.RetryAfter, e.Message)
}

// copyFinal gives each waiting caller its own copy of a final error (*RejectedError or
// *ThrottledError), so that one caller changing it cannot change another's.
func copyFinal(err error) error {
	switch e := err.(type) {
	case *RejectedError:
		c := *e
		return &c
	case *ThrottledError:
		c := *e
		return &c
	}
	return err
}

// UnavailableError: no ids arrived within the wait timeout: every server failed or is down, or
// (Last nil) no answer came in time at all, e.g. a wait shorter than a request's round trip.
// Last is the last server failure seen.
type UnavailableError struct {
	// Waited is how long the call waited for ids.
	Waited time.Duration
	// Last is the most recent server failure, if any.
	Last *ServerFault
}

func (e *UnavailableError) Error() string {
	s := fmt.Sprintf("leafid: no ids within the %v wait (timed out)", e.Waited.Round(time.Millisecond))
	if e.Last != nil {
		return s + ": no server delivered (last failure: " + e.Last.Error() + ")"
	}
	return s + ": no server had answered yet, none had failed"
}

// Unwrap gives the last server failure, so errors.As finds a *ServerFault.
func (e *UnavailableError) Unwrap() error {
	if e.Last == nil {
		return nil
	}
	return e.Last
}

// FaultKind says how a server failed to deliver a batch.
type FaultKind int

const (
	// FaultTransport: no HTTP answer (connection refused or reset, timeout).
	FaultTransport FaultKind = iota + 1
	// FaultStatus: a 5xx, or a 4xx that is this server's only (engine_disabled, a proxy's page...).
	FaultStatus
	// FaultBadResponse: a 200 whose body is not a valid batch (not JSON, ids not positive and
	// strictly increasing, more ids than asked, another tag). None of its ids is used.
	FaultBadResponse
	// FaultBehind: a valid batch whose ids all lie at or below the last id this client handed
	// out for the supply (a lagging server after a failover). Its ids are discarded and the
	// server asked again at once.
	FaultBehind
)

// ServerFault is one server's failure to deliver a batch: the server is then marked down and the
// next one is asked at once.
type ServerFault struct {
	// Server is the base URL of the server.
	Server string
	// Kind is what went wrong.
	Kind FaultKind
	// Status is the HTTP status for FaultStatus, else 0.
	Status int
	// Code is the error body's code for FaultStatus, if it had one.
	Code string
	// Detail describes the failure.
	Detail string
}

func (f *ServerFault) Error() string {
	switch f.Kind {
	case FaultStatus:
		if f.Code != "" {
			return fmt.Sprintf("%s: HTTP %d %s", f.Server, f.Status, f.Code)
		}
		return fmt.Sprintf("%s: HTTP %d", f.Server, f.Status)
	case FaultBadResponse:
		return fmt.Sprintf("%s: bad response: %s", f.Server, f.Detail)
	case FaultBehind:
		return fmt.Sprintf("%s: behind: %s", f.Server, f.Detail)
	default:
		return fmt.Sprintf("%s: %s", f.Server, f.Detail)
	}
}

// Token is a caller token. Its String and GoString never show it, so that a Config printed
// to a log (%v, %+v, %#v) does not leak the credential.
type Token string

// String redacts the token.
func (Token) String() string { return "<redacted>" }

// GoString redacts the token.
func (Token) GoString() string { return `"<redacted>"` }
