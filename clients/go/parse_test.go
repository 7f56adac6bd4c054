package leafid

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseBatchTakesOnlyValidBatchesOfTheTag(t *testing.T) {
	seg := &request{count: 3, tag: "t"}
	snow := &request{count: 3}
	for _, c := range []struct {
		body string
		req  *request
		want []int64
	}{
		{`{"biz_tag":"t","ids":["1","2","5"]}`, seg, []int64{1, 2, 5}},
		{` { "ids" : [ "1" , 2 ] , "biz_tag" : "t" } `, seg, []int64{1, 2}},
		{`{"biz_tag":"t","ids":["9223372036854775807"]}`, seg, []int64{9223372036854775807}},
		{`{"ids":["7"]}`, snow, []int64{7}},
		{`{"ids":["7"],"biz_tag":"x"}`, snow, []int64{7}},
		{`{"biz_tag":"t","ids":["1"],"extra":{"a":[1,2]}}`, seg, []int64{1}},
		{`{"biz_tag":"\u0074","ids":["1"]}`, seg, []int64{1}},
		{`{"biz_tag":"t","ids":["1","2","5","6"]}`, seg, nil},
		{`{"biz_tag":"t","ids":[]}`, seg, nil},
		{`{"biz_tag":"t"}`, seg, nil},
		{`{"biz_tag":"t","ids":null}`, seg, nil},
		{`{"biz_tag":"t","ids":["0","1"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["-1"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["2","2"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["3","2"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["9223372036854775808"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["1e3"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["01"]}`, seg, nil},
		{`{"biz_tag":"t","ids":[""]}`, seg, nil},
		{`{"biz_tag":"t","ids":[true]}`, seg, nil},
		{`{"biz_tag":"u","ids":["1"]}`, seg, nil},
		{`{"biz_tag":null,"ids":["1"]}`, seg, nil},
		{`{"ids":["1"]}`, seg, nil},
		{`{"biz_tag":"t","ids":["1"]} x`, seg, nil},
		{`{"biz_tag":"t","ids":["1"]`, seg, nil},
		{``, seg, nil},
		{`[]`, seg, nil},
	} {
		got, err := parseBatch([]byte(c.body), c.req.tag, c.req.count)
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: accepted %v", c.body, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.body, got, err, c.want)
		}
	}
}

// FuzzScanBatch checks the fast scanner against encoding/json: wherever it reads a body, it
// reads what encoding/json reads. `go test` runs the seeds; `go test -fuzz FuzzScanBatch` more.
func FuzzScanBatch(f *testing.F) {
	for _, s := range []string{
		`{"biz_tag":"t","ids":["1","2","5"]}`, `{"ids":[1,2,3]}`, `{}`, `{"ids":[]}`,
		` {"ids" :[ "9223372036854775807" ] ,"biz_tag":"a:b.c-d_e"}`, `{"ids":["01"]}`,
		`{"ids":[1.5]}`, `{"ids":["1"],"ids":["2"]}`, `{"biz_tag":"a","biz_tag":"b"}`,
		`{"ids":["18446744073709551616"]}`, `{"ids":[1,]}`, `{"ids":[1 2]}`, `{"IDS":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tag, hasTag, ids, ok := scanBatch(body)
		if !ok {
			return
		}
		tag2, hasTag2, ids2, err := decodeBatch(body)
		if err != nil {
			t.Fatalf("%q: scanned %q %v %v, encoding/json: %v", body, tag, hasTag, ids, err)
		}
		if tag != tag2 || hasTag != hasTag2 || !reflect.DeepEqual(ids, ids2) {
			t.Fatalf("%q: scanned %q %v %v, encoding/json %q %v %v", body, tag, hasTag, ids, tag2, hasTag2, ids2)
		}
	})
}

// batchBody is a segment body of n ids near 2^63, as the server writes it.
func batchBody(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"biz_tag":"bench","ids":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"` + strconv.FormatInt(9223372036854000000+int64(i), 10) + `"`)
	}
	sb.WriteString("]}")
	return []byte(sb.String())
}

// BenchmarkParseBatch reads a body of 1000 ids with the scanner and with encoding/json.
func BenchmarkParseBatch(b *testing.B) {
	body := batchBody(1000)
	req := &request{count: 1000, tag: "bench"}
	b.Run("scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := parseBatch(body, req.tag, req.count); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, _, _, err := decodeBatch(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := newServers([]string{"http://h:1"}, nil, time.Second, 50*time.Millisecond, 5*time.Second)
	got := []time.Duration{s.backoff(1), s.backoff(2), s.backoff(3), s.backoff(8), s.backoff(1 << 30)}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestA200SentBeforeTheLatestFailureMarksNothingUp(t *testing.T) {
	s := newServers([]string{"http://h:1"}, nil, time.Second, 50*time.Millisecond, 5*time.Second)
	srv := s.list[0]
	// A request is sent; another one to the same server fails (it was killed); then the first
	// one's 200 arrives: older news than that failure.
	seen := srv.downCount()
	s.markDown(srv)
	if srv.markUpUnlessDownSince(seen) || !srv.isDown() {
		t.Fatal("a 200 sent before the failure marked the server up")
	}
	if !srv.markUpUnlessDownSince(srv.downCount()) || srv.isDown() {
		t.Fatal("a 200 sent after the failure did not mark the server up")
	}
}

func TestTheCatchUpAsksPastTheFloorInOneRequestWithinTheServerLimit(t *testing.T) {
	for _, c := range []struct {
		floor, last int64
		batch, want int
	}{
		{1000, 500, 100, 600}, // 500 ids to reach the floor, then a batch
		{1000, 1000, 100, 100},
		{6000000, 1000000, 100, MaxBatch},
		{math.MaxInt64, 1, 100, MaxBatch},
		{10, 5, MaxBatch, MaxBatch},
	} {
		if got := catchUpCount(c.floor, c.last, c.batch); got != c.want {
			t.Errorf("catchUpCount(%d, %d, %d) = %d, want %d", c.floor, c.last, c.batch, got, c.want)
		}
	}
}

func TestAnAnswerWhollyBehindTheFloorIsReadFromItsTailOnly(t *testing.T) {
	for _, c := range []struct {
		body  string
		count int
		floor int64
		want  *behindAnswer
	}{
		{`{"biz_tag":"t","ids":["7","8","9"]}` + "\n", 3, 9, &behindAnswer{3, 9}},
		{`{"ids":["5"]}`, 3, 100, &behindAnswer{1, 5}},
		// Above the floor, no floor yet, another shape, more ids than asked: parsed whole.
		{`{"biz_tag":"t","ids":["9","10"]}`, 3, 9, nil},
		{`{"ids":["5"]}`, 3, 0, nil},
		{`{"ids":[5]}`, 3, 100, nil},
		{`{"ids":["5"],"x":1}`, 3, 100, nil},
		{`{"ids":["0"]}`, 3, 100, nil},
		{`{"ids":["99999999999999999999"]}`, 3, math.MaxInt64, nil},
		{`{"ids":["1","2","3","4"]}`, 3, 100, nil},
		{``, 3, 100, nil},
	} {
		got := behindTail([]byte(c.body), c.count, c.floor)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("behindTail(%q, %d, %d) = %+v, want %+v", c.body, c.count, c.floor, got, c.want)
		}
	}
}
