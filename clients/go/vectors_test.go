package leafid

// The shared client vectors (../conformance/vectors/*.json) run against this package's own rule
// functions: the same files every client's tests read.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vectorCase is one case of any vector file (each test reads the fields of its file).
type vectorCase map[string]json.RawMessage

func loadVectors(t *testing.T, file string) []vectorCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "conformance", "vectors", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Description string       `json:"description"`
		Version     int          `json:"version"`
		Cases       []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if doc.Description == "" || doc.Version < 1 || len(doc.Cases) == 0 {
		t.Fatalf("%s: no description, version or case", file)
	}
	return doc.Cases
}

// get decodes field k of c into v, failing the test if it cannot.
func (c vectorCase) get(t *testing.T, k string, v interface{}) {
	t.Helper()
	if err := json.Unmarshal(c[k], v); err != nil {
		t.Fatalf("%s: field %s: %v", c.name(), k, err)
	}
}

func (c vectorCase) name() string {
	var n string
	_ = json.Unmarshal(c["name"], &n)
	return n
}

func (c vectorCase) str(t *testing.T, k string) string {
	var s string
	c.get(t, k, &s)
	return s
}

func (c vectorCase) int64(t *testing.T, k string) int64 {
	var n int64
	c.get(t, k, &n)
	return n
}

func (c vectorCase) bool(t *testing.T, k string) bool {
	var b bool
	c.get(t, k, &b)
	return b
}

func TestVectorsErrors(t *testing.T) {
	for _, c := range loadVectors(t, "errors.json") {
		status := int(c.int64(t, "status"))
		if status == 200 { // not_formatted: made by parseFormatted, not by this table
			continue
		}
		code := c.str(t, "code")
		got := "failover"
		if refusalIsFinal(status, code) {
			got = "reject"
		} else if isQuotaWait(status, code) {
			got = "wait"
		}
		if want := c.str(t, "action"); got != want {
			t.Errorf("%s: %s, want %s", c.name(), got, want)
		}
	}
}

func TestVectorsTags(t *testing.T) {
	for _, c := range loadVectors(t, "tags.json") {
		if got := ValidTag(c.str(t, "tag")); got != c.bool(t, "valid") {
			t.Errorf("%s: %v", c.name(), got)
		}
	}
}

func TestVectorsBatchSizing(t *testing.T) {
	for _, c := range loadVectors(t, "batch.json") {
		var got int
		switch rule := c.str(t, "rule"); rule {
		case "demand":
			var elapsedMs float64
			c.get(t, "elapsed_ms", &elapsedMs)
			got = nextBatchSize(int(c.int64(t, "size")), int(c.int64(t, "min")), int(c.int64(t, "max")),
				c.int64(t, "used"), c.int64(t, "batch_ids"), time.Duration(elapsedMs*float64(time.Millisecond)),
				time.Duration(c.int64(t, "target_ms"))*time.Millisecond, c.bool(t, "starved"))
		case "catch_up":
			got = catchUpCount(c.int64(t, "floor"), c.int64(t, "last"), int(c.int64(t, "size")), int(c.int64(t, "limit")))
		default:
			t.Fatalf("%s: rule %q", c.name(), rule)
		}
		if want := int(c.int64(t, "want")); got != want {
			t.Errorf("%s: %d, want %d", c.name(), got, want)
		}
	}
}

func TestVectorsBoundsRounding(t *testing.T) {
	for _, c := range loadVectors(t, "bounds.json") {
		from, err1 := time.Parse(time.RFC3339Nano, c.str(t, "from"))
		to, err2 := time.Parse(time.RFC3339Nano, c.str(t, "to"))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", c.name(), err1, err2)
		}
		gotFrom, gotTo := boundsInstants(from, to)
		if gotFrom != c.str(t, "query_from") || gotTo != c.str(t, "query_to") {
			t.Errorf("%s: %s %s", c.name(), gotFrom, gotTo)
		}
	}
}

func TestVectorsResponses(t *testing.T) {
	for _, c := range loadVectors(t, "responses.json") {
		body := []byte(c.str(t, "body"))
		valid := c.bool(t, "valid")
		switch kind := c.str(t, "kind"); kind {
		case "ranges":
			var tag *string
			c.get(t, "tag", &tag)
			wantTag := ""
			if tag != nil {
				wantTag = *tag
			}
			runs, strict, err := parseRangesBody(body, wantTag, int(c.int64(t, "asked")))
			if (err == nil) != valid {
				t.Errorf("%s: error %v", c.name(), err)
				continue
			}
			if valid {
				wantStrict := false
				if _, ok := c["strict"]; ok {
					wantStrict = c.bool(t, "strict")
				}
				if strict != wantStrict {
					t.Errorf("%s: strict %v, want %v", c.name(), strict, wantStrict)
				}
				var want [][2]string
				c.get(t, "runs", &want)
				got := make([][2]string, len(runs))
				for i, r := range runs {
					got[i] = [2]string{strconv.FormatInt(r.first, 10), strconv.FormatInt(r.last, 10)}
				}
				if len(got) != len(want) {
					t.Errorf("%s: runs %v, want %v", c.name(), got, want)
					continue
				}
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("%s: runs %v, want %v", c.name(), got, want)
					}
				}
			}
		case "bounds":
			b, err := parseBounds(body)
			if (err == nil) != valid {
				t.Errorf("%s: error %v", c.name(), err)
				continue
			}
			if valid && (strconv.FormatInt(b.MinID, 10) != c.str(t, "min_id") || strconv.FormatInt(b.MaxID, 10) != c.str(t, "max_id")) {
				t.Errorf("%s: %d..%d", c.name(), b.MinID, b.MaxID)
			}
		default:
			t.Fatalf("%s: kind %q", c.name(), kind)
		}
	}
}

func TestVectorsRFC3339(t *testing.T) {
	for _, c := range loadVectors(t, "rfc3339.json") {
		at, err := parseRFC3339(c.str(t, "text"))
		if valid := c.bool(t, "valid"); (err == nil) != valid {
			t.Errorf("%s: error %v", c.name(), err)
			continue
		}
		if err == nil {
			// Floor to the millisecond, before 1970 too.
			ms := at.Unix()*1000 + int64(at.Nanosecond()/1e6)
			if want := c.int64(t, "unix_ms"); ms != want {
				t.Errorf("%s: %d ms, want %d", c.name(), ms, want)
			}
		}
	}
}

func TestVectorsFormats(t *testing.T) {
	for _, c := range loadVectors(t, "formats.json") {
		got, notFormatted, err := parseFormatted([]byte(c.str(t, "body")), c.str(t, "tag"), int(c.int64(t, "asked")))
		result := "ok"
		if notFormatted {
			result = "not_formatted"
		} else if err != nil {
			result = "fault"
		}
		if want := c.str(t, "result"); result != want {
			t.Errorf("%s: %s (%v), want %s", c.name(), result, err, want)
			continue
		}
		if result != "ok" {
			continue
		}
		var ids []string
		c.get(t, "ids", &ids)
		if strings.Join(got.texts, "\n") != strings.Join(ids, "\n") || got.unordered == c.bool(t, "ordered") ||
			got.periodEnd.UnixMilli() != c.int64(t, "period_end_ms") {
			t.Errorf("%s: %+v", c.name(), got)
		}
	}
}
