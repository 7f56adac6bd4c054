package leafid

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serverBinary is the leafid server the tests start: $LEAFID_BIN, else the repository's
// target/debug/leafid (cargo build --bin leafid at the repository root builds it).
func serverBinary(t testing.TB) string {
	if p := os.Getenv("LEAFID_BIN"); p != "" {
		return p
	}
	p, err := filepath.Abs("../../target/debug/leafid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the server binary %s is missing: run `cargo build --bin leafid` at the repository root, or set LEAFID_BIN", p)
	}
	return p
}

// database is a fresh SQLite database URL in a test's temporary directory. Servers started on
// the same URL share it, as servers of one MySQL database do.
func database(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "leafid.db")
}

// adminToken is every test server's admin.token; createTag sends it (admin writes are refused
// without a token, loopback or not).
var adminToken = fmt.Sprintf("go-client-test-%d-%d", os.Getpid(), time.Now().UnixNano())

// leafidServer is a real leafid process, killed when the test ends.
type leafidServer struct {
	cmd  *exec.Cmd
	Port int
	URL  string
	mu   sync.Mutex
	dead bool
}

// startServer starts the binary on dbURL and port (0: a free one, read from its JSON log), with
// extra LEAFID__... settings, in a temporary working directory of its own, and returns once it
// is ready.
func startServer(t testing.TB, dbURL string, port int, env ...string) *leafidServer {
	t.Helper()
	cmd := exec.Command(serverBinary(t))
	// Its own working directory: the server writes its snowflake worker cache file there
	// (data/snowflake-worker.json), neither shared with another server nor left in the checkout.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		"LEAFID__SERVER__PORT="+strconv.Itoa(port),
		"LEAFID__SERVER__HOST=127.0.0.1",
		"LEAFID__SERVER__WORKERS=1",
		"LEAFID__DATABASE__URL="+dbURL,
		"LEAFID__LOG__FORMAT=json",
		"LEAFID__ADMIN__TOKEN="+adminToken,
		"RUST_LOG=info",
	)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	s := &leafidServer{cmd: cmd}
	t.Cleanup(s.kill)
	ports := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var v struct {
				Message string `json:"message"`
				Port    int    `json:"port"`
			}
			if json.Unmarshal(line, &v) == nil && v.Message == "listening" {
				select {
				case ports <- v.Port:
				default:
				}
			}
			if os.Getenv("TEST_LOG") != "" {
				fmt.Fprintf(os.Stderr, "[leafid %d] %s\n", cmd.Process.Pid, line)
			}
		}
	}()
	select {
	case p := <-ports:
		s.Port = p
		s.URL = fmt.Sprintf("http://127.0.0.1:%d", p)
	case <-time.After(30 * time.Second):
		s.kill()
		t.Fatalf("leafid did not log its port within 30 s")
	}
	waitReady(t, s.URL)
	return s
}

// waitReady waits until /health/ready answers 200.
func waitReady(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s/health/ready did not answer 200 within 20 s", base)
}

// kill sends SIGKILL (continuing a stopped process first) and reaps the process.
func (s *leafidServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	s.dead = true
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// signal sends sig (SIGSTOP, SIGCONT) to the server.
func (s *leafidServer) signal(t testing.TB, sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	if sig != syscall.SIGSTOP {
		return
	}
	// kill returns before the stop takes hold: on a busy machine a stopped server still answered
	// requests. Wait until every thread is stopped (state T in /proc).
	deadline := time.Now().Add(10 * time.Second)
	for !allThreadsStopped(s.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("server %d not stopped 10 s after SIGSTOP", s.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of pid is in state T in /proc (one that exits
// meanwhile counts as stopped).
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// createTag creates tag on the server with step and, if not empty, a starting max_id (sent as
// an exact JSON number).
func createTag(t testing.TB, base, tag string, step int, maxID string) {
	t.Helper()
	body := fmt.Sprintf(`{"biz_tag":%q,"step":%d`, tag, step)
	if maxID != "" {
		body += `,"max_id":` + maxID
	}
	body += "}"
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/tags", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("create tag %s: %d %s", tag, resp.StatusCode, b.String())
	}
}

// closedPort is an address on which nothing listens: a port the kernel gave and took back.
func closedPort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
