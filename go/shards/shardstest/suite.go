package shardstest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"ringlab.local/go/shards"
)

// DownloadFunc is the signature of exercise 19b.
type DownloadFunc func(ctx context.Context, indexURL, dir string, opts shards.Options) error

// Limits that hold on a slow machine: no verdict depends on speed, only on what a correct Download
// cannot do (finish before a Retry-After, wait out a 60 s stall, exceed its limit).
const (
	settle   = 10 * time.Second // for goroutines to end and connections to close after Download returns
	deadline = 30 * time.Second // for a Download that should succeed
	forever  = 30 * time.Second // a fault that outlasts every check of a correct Download
	shardLen = 48 << 10
)

// testOptions are generous per-request timeouts and short backoffs; tests override what they probe.
func testOptions(concurrency int) shards.Options {
	return shards.Options{Concurrency: concurrency, ConnectTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		Retries: 4, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
}

// Run tests download against every fault; each case also checks that no goroutine outlives the call
// and that the server sees every connection closed. An unwritten exercise ("not implemented") is skipped.
func Run(t *testing.T, download DownloadFunc) {
	probe := NewServer(Config{Shards: 1, Size: 1024, Seed: 1})
	err := download(context.Background(), probe.IndexURL(), t.TempDir(), testOptions(1))
	probe.Close()
	if err != nil && strings.Contains(err.Error(), "not implemented") {
		t.Skipf("exercise not attempted yet (%v): write Download in go/shards/exercise/download.go", err)
	}
	cases := []struct {
		name string
		run  func(*testing.T, DownloadFunc)
	}{
		{"all_shards_at_exactly_the_limit", testLimit},
		{"fewer_shards_than_the_limit", testFewShards},
		{"retry_after_is_honoured", testRetryAfter},
		{"backoff_grows", testBackoff},
		{"404_is_final_and_first", testNotFound},
		{"403_is_final", testForbidden},
		{"reset_is_retried", testReset},
		{"truncated_body_resumes_with_range", testTruncated},
		{"stall_hits_the_read_timeout", testStall},
		{"slow_but_live_is_not_cut", testSlowButLive},
		{"deadline_cancels_everything", testDeadline},
		{"cancel_stops_everything", testCancel},
		{"wrong_bytes_fail_the_checksum", testChecksum},
		{"no_etag_no_check", testNoEtag},
		{"bad_options_are_refused", testBadOptions},
	}
	for _, c := range cases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			c.run(t, download)
			checkNoLeak(t, before)
		})
	}
}

// checkNoLeak waits (up to settle) for the goroutine count to fall back to what it was before the case.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	end := time.Now().Add(settle)
	for runtime.NumGoroutine() > before && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	if now := runtime.NumGoroutine(); now > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines still running %v after Download returned (%d before it started): a body "+
			"never closed, a worker never told to stop, idle connections never closed?\n%s",
			now-before, settle, before, buf[:runtime.Stack(buf, true)])
	}
}

// checkServer checks what the server saw: never more than limit requests in flight nor connections open,
// and (waiting up to settle) every connection closed.
func checkServer(t *testing.T, s *Server, limit int) {
	t.Helper()
	if s.Peak() > limit || s.PeakConns() > limit {
		t.Errorf("the server saw %d requests in flight and %d connections open at once with Concurrency %d: "+
			"no limit, or bodies never closed", s.Peak(), s.PeakConns(), limit)
	}
	end := time.Now().Add(settle)
	for (s.InFlight() > 0 || s.OpenConns() > 0) && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.InFlight(); n > 0 {
		t.Errorf("%d requests still in flight %v after Download returned: goroutines still running after the "+
			"first error or the cancel (cancel the workers' context and wait for them)", n, settle)
	} else if n := s.OpenConns(); n > 0 {
		t.Errorf("%d connections still open after Download returned: a body never closed, or idle "+
			"connections kept (close them: http.Transport.CloseIdleConnections)", n)
	}
}

// checkComplete: no error, every shard and the index byte-identical, nothing else in dir.
func checkComplete(t *testing.T, s *Server, dir string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("Download failed: %v", err)
	}
	var want, got []string
	for name := range s.Files {
		want = append(want, name)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		got = append(got, e.Name())
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("dir holds %v, want exactly the index and the shards %v", got, want)
	}
	for name, data := range s.Files {
		on, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.Equal(on, data) {
			t.Errorf("%s: %d bytes on disk differ from the %d served", name, len(on), len(data))
		}
	}
}

// checkNoFinal: no shard whose download did not complete is at its final path.
func checkNoFinal(t *testing.T, s *Server, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil && !bytes.Equal(data, s.Files[name]) {
			t.Errorf("%s is at its final path but is not the file served (%d bytes): write NAME.part, "+
				"verify, then rename", name, len(data))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, shards.IndexName)); err == nil {
		t.Errorf("the index is in dir although the download failed")
	}
}

func call(fn DownloadFunc, s *Server, opts shards.Options, timeout time.Duration, t *testing.T) (string, error, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	// cancelled only once the case is over: a Download that leaves work behind is seen doing so
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	start := time.Now()
	err := fn(ctx, s.IndexURL(), dir, opts)
	return dir, err, time.Since(start)
}

func testLimit(t *testing.T, fn DownloadFunc) {
	// every answer waits until 4 are in flight: the peak is exactly the limit, whatever the speed
	s := NewServer(Config{Shards: 12, Size: shardLen, Seed: 2, Gate: 4})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(4), deadline, t)
	checkComplete(t, s, dir, err)
	if s.Peak() != 4 {
		t.Errorf("peak requests in flight %d with Concurrency 4 and 12 shards: want exactly 4", s.Peak())
	}
	if s.PeakConns() > 4 {
		t.Errorf("peak connections open %d with Concurrency 4: want at most 4", s.PeakConns())
	}
	for _, name := range s.Shards {
		if n := len(s.Requests(name)); n != 1 {
			t.Errorf("%s requested %d times without a fault", name, n)
		}
	}
	checkServer(t, s, 4)
}

func testFewShards(t *testing.T, fn DownloadFunc) {
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 3})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(8), deadline, t)
	checkComplete(t, s, dir, err)
	checkServer(t, s, 8)
}

// gaps returns, for each retry of name, the time from the end of the previous answer to the retry.
func gaps(s *Server, name string) []time.Duration {
	reqs := s.Requests(name)
	var out []time.Duration
	for i := 1; i < len(reqs); i++ {
		out = append(out, reqs[i].Start.Sub(reqs[i-1].End))
	}
	return out
}

func testRetryAfter(t *testing.T, fn DownloadFunc) {
	a, b := ShardName(1, 4), ShardName(2, 4)
	s := NewServer(Config{Shards: 4, Size: shardLen, Seed: 4,
		Faults: map[string][]Fault{a: {{Status: 503, RetryAfter: "1"}}, b: {{Status: 429, RetryAfter: "1"}}}})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(4), deadline, t)
	checkComplete(t, s, dir, err)
	for _, name := range []string{a, b} {
		g := gaps(s, name)
		if len(g) != 1 {
			t.Fatalf("%s: %d retries after one 503/429, want 1", name, len(g))
		}
		if g[0] < time.Second {
			t.Errorf("%s retried %v after an answer with Retry-After: 1 (backoff at most 100 ms): "+
				"Retry-After ignored", name, g[0].Round(time.Millisecond))
		}
	}
	checkServer(t, s, 4)
}

func testBackoff(t *testing.T, fn DownloadFunc) {
	name := ShardName(0, 2)
	s := NewServer(Config{Shards: 2, Size: shardLen, Seed: 5,
		Faults: map[string][]Fault{name: {{Status: 500}, {Status: 502}, {Status: 500}}}})
	defer s.Close()
	opts := testOptions(2)
	opts.BackoffBase, opts.BackoffMax = 80*time.Millisecond, time.Second
	dir, err, _ := call(fn, s, opts, deadline, t)
	checkComplete(t, s, dir, err)
	g := gaps(s, name)
	if len(g) != 3 {
		t.Fatalf("%s: %d retries after three 5xx, want 3", name, len(g))
	}
	for n, gap := range g {
		if lo, _ := opts.Backoff(n); gap < lo {
			t.Errorf("retry %d of %s came %v after the failure; the backoff is at least %v: no backoff?",
				n+1, name, gap.Round(time.Millisecond), lo)
		}
	}
	checkServer(t, s, 2)
}

// testFinal: one shard answers status forever, the others hang; Download must fail at once with that
// status, never retry it, cancel the hanging requests and leave nothing at their final paths.
func testFinal(t *testing.T, fn DownloadFunc, status int, word string) {
	bad := ShardName(2, 6)
	faults := map[string][]Fault{}
	for i := 0; i < 6; i++ {
		faults[ShardName(i, 6)] = []Fault{{Latency: forever, Repeat: true}}
	}
	faults[bad] = []Fault{{Status: status, Repeat: true}}
	s := NewServer(Config{Shards: 6, Size: shardLen, Seed: 6, Faults: faults})
	defer s.Close()
	opts := testOptions(3)
	opts.ReadTimeout = forever // no timeout ends the hanging requests while the checks below watch them
	dir, err, took := call(fn, s, opts, 2*forever, t)
	if err == nil {
		t.Fatalf("Download returned nil although %s answered %d: the first error was swallowed", bad, status)
	}
	if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), word) {
		t.Errorf("error %q should name the shard %s and %q", err, bad, word)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q is the cancellation of the others, not the first failure", err)
	}
	if took >= forever {
		t.Errorf("Download took %v: the requests in flight were not cancelled after the final %d", took, status)
	}
	if n := len(s.Requests(bad)); n != 1 {
		t.Errorf("%s answered %d and was requested %d times: a %d is final, never retried", bad, status, n, status)
	}
	checkNoFinal(t, s, dir, s.Shards...)
	checkServer(t, s, 3)
}

func testNotFound(t *testing.T, fn DownloadFunc)  { testFinal(t, fn, 404, "404") }
func testForbidden(t *testing.T, fn DownloadFunc) { testFinal(t, fn, 403, "403") }

func testReset(t *testing.T, fn DownloadFunc) {
	name := ShardName(1, 3)
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 7,
		Faults: map[string][]Fault{name: {{Cut: "reset", CutAt: 16 << 10}}}})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(3), deadline, t)
	checkComplete(t, s, dir, err)
	if n := len(s.Requests(name)); n != 2 {
		t.Errorf("%s: %d requests after one reset, want 2", name, n)
	}
	checkServer(t, s, 3)
}

func testTruncated(t *testing.T, fn DownloadFunc) {
	name := ShardName(0, 3)
	const cut = 20000
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 8,
		Faults: map[string][]Fault{name: {{Cut: "truncate", CutAt: cut}}}})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(3), deadline, t)
	checkComplete(t, s, dir, err)
	reqs := s.Requests(name)
	if len(reqs) != 2 {
		t.Fatalf("%s: %d requests after one truncated body, want 2", name, len(reqs))
	}
	if want := "bytes=20000-"; reqs[1].Range != want {
		t.Errorf("%s: the retry after %d bytes asked Range %q, want %q: resume the .part, do not start from zero",
			name, cut, reqs[1].Range, want)
	}
	checkServer(t, s, 3)
}

func testStall(t *testing.T, fn DownloadFunc) {
	name := ShardName(2, 3)
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 9,
		Faults: map[string][]Fault{name: {{StallAfter: 16 << 10, Stall: forever}}}})
	defer s.Close()
	opts := testOptions(3)
	opts.ReadTimeout = time.Second
	dir, err, took := call(fn, s, opts, 2*forever, t)
	if took >= forever {
		t.Fatalf("Download took %v with a body stalled for %v and ReadTimeout %v: no read timeout (a connect "+
			"timeout alone does not bound a stalled body)", took, forever, opts.ReadTimeout)
	}
	checkComplete(t, s, dir, err)
	if reqs := s.Requests(name); len(reqs) != 2 || reqs[1].Range == "" {
		t.Errorf("%s: requests %+v after a stall at 16 KiB: want one retry with a Range", name, reqs)
	}
	checkServer(t, s, 3)
}

func testSlowButLive(t *testing.T, fn DownloadFunc) {
	name := ShardName(0, 2)
	s := NewServer(Config{Shards: 2, Size: shardLen, Seed: 10,
		Faults: map[string][]Fault{name: {{BytesPerSec: 24 << 10}}}}) // 2 s for the shard, 8 KiB every 1/3 s
	defer s.Close()
	opts := testOptions(2)
	opts.ReadTimeout = 1500 * time.Millisecond
	dir, err, _ := call(fn, s, opts, deadline, t)
	checkComplete(t, s, dir, err)
	if n := len(s.Requests(name)); n != 1 {
		t.Errorf("%s, sent at 24 KiB/s (2 s in all, never 1.5 s without a byte), was requested %d times with "+
			"ReadTimeout 1.5 s: the read timeout must bound each wait for data, not the whole request", name, n)
	}
	checkServer(t, s, 2)
}

func testDeadline(t *testing.T, fn DownloadFunc) {
	s := NewServer(Config{Shards: 6, Size: shardLen, Seed: 11, Faults: stallAll(6)})
	defer s.Close()
	dir, err, took := call(fn, s, testOptions(3), time.Second, t)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Download returned %v at the deadline: want an error wrapping context.DeadlineExceeded", err)
	}
	if took >= forever {
		t.Errorf("Download took %v with a 1 s deadline", took)
	}
	checkNoFinal(t, s, dir, s.Shards...)
	checkServer(t, s, 3)
}

// stallAll makes every shard of n stall after 8 KiB, at every attempt.
func stallAll(n int) map[string][]Fault {
	faults := map[string][]Fault{}
	for i := 0; i < n; i++ {
		faults[ShardName(i, n)] = []Fault{{StallAfter: 8 << 10, Stall: forever, Repeat: true}}
	}
	return faults
}

func testCancel(t *testing.T, fn DownloadFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// cancel once 4 requests are in flight, as Ctrl-C would
	s := NewServer(Config{Shards: 8, Size: shardLen, Seed: 12, Faults: stallAll(8), Gate: 4, OnGate: cancel})
	defer s.Close()
	dir := t.TempDir()
	start := time.Now()
	err := fn(ctx, s.IndexURL(), dir, testOptions(4))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Download returned %v after its context was cancelled: want an error wrapping context.Canceled", err)
	}
	if took := time.Since(start); took >= forever {
		t.Errorf("Download took %v to notice the cancel", took)
	}
	checkNoFinal(t, s, dir, s.Shards...)
	checkServer(t, s, 4)
}

func testChecksum(t *testing.T, fn DownloadFunc) {
	name := ShardName(1, 3)
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 13,
		Faults: map[string][]Fault{name: {{WrongBytes: true, Repeat: true}}}})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(1), deadline, t)
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Download returned %v for a shard whose bytes do not match X-Linked-Etag: want an error naming "+
			"%s and \"checksum\"", err, name)
	}
	checkNoFinal(t, s, dir, name)
	checkServer(t, s, 1)
}

func testNoEtag(t *testing.T, fn DownloadFunc) {
	s := NewServer(Config{Shards: 3, Size: shardLen, Seed: 14, NoEtag: true})
	defer s.Close()
	dir, err, _ := call(fn, s, testOptions(2), deadline, t)
	checkComplete(t, s, dir, err)
	checkServer(t, s, 2)
}

func testBadOptions(t *testing.T, fn DownloadFunc) {
	s := NewServer(Config{Shards: 1, Size: 1024, Seed: 15})
	defer s.Close()
	for _, change := range []func(*shards.Options){
		func(o *shards.Options) { o.Concurrency = 0 },
		func(o *shards.Options) { o.ReadTimeout = 0 },
		func(o *shards.Options) { o.Retries = -1 },
	} {
		opts := testOptions(2)
		change(&opts)
		if _, err, _ := call(fn, s, opts, deadline, t); err == nil {
			t.Errorf("Download accepted %+v", opts)
		}
	}
}
