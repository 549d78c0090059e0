// Exercise 19b: download a sharded checkpoint with a concurrency limit, timeouts, retries and clean
// cancellation, in Go's standard library. go/shards/solution/download.go is the worked answer; the
// learner's file, go/shards/exercise/download.go, is generated from it (python -m
// ringlab.course.make_exercises). Write Download there, test it from go/ with
// `go test -race ./shards/exercise`, and grade it with `ringlab check 19b`.
package solution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringlab.local/go/shards"
)

// Options tunes Download (see shards.Options); the overall deadline is ctx's.
type Options = shards.Options

// Download fetches the checkpoint whose index (model.safetensors.index.json) is at indexURL into dir:
// every shard the index's weight_map names, at URLs relative to indexURL, then the index itself.
//
// The contract the tests and the grader check:
//   - at most opts.Concurrency requests in flight, hence connections open, at any moment;
//   - opts.ConnectTimeout bounds each connect, opts.ReadTimeout each wait for headers or body bytes;
//     ctx's deadline bounds the whole download;
//   - 5xx, 429, connection errors and read timeouts are retried up to opts.Retries times per shard,
//     waiting as shards.Options documents and at least Retry-After; any other 4xx is final;
//   - a shard is written to NAME.part, resumed with a Range request after a cut (and by a later call
//     after a failed one), checked against the sha256 in X-Linked-Etag when the server sends one, then
//     renamed to NAME: no file at a final path is ever incomplete or unverified;
//   - on ctx's end or the first final failure, every request in flight is cancelled and Download
//     returns only when all its goroutines have ended and its connections are closed, with the first
//     error (naming the shard; errors.Is finds context.DeadlineExceeded or context.Canceled).
func Download(ctx context.Context, indexURL, dir string, opts Options) error {
	// BEGIN SOLUTION
	if err := opts.Validate(); err != nil {
		return err
	}
	base, err := url.Parse(indexURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("index URL %q: want an absolute http(s) URL", indexURL)
	}
	indexName := path.Base(base.Path)
	if indexName == "/" || indexName == "." || indexName == ".." {
		return fmt.Errorf("index URL %q: names no file", indexURL)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dialed := &conns{dialer: &net.Dialer{Timeout: opts.ConnectTimeout}}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialed.DialContext,
		ResponseHeaderTimeout: opts.ReadTimeout,
		MaxConnsPerHost:       opts.Concurrency,
		MaxIdleConnsPerHost:   opts.Concurrency,
		DisableCompression:    true, // the sha256 and the Range offsets are of the bytes as stored
	}
	// Idle keep-alive connections would outlive Download: close them, and every connection it dialed, on
	// every return.
	defer transport.CloseIdleConnections()
	defer dialed.closeAll()
	d := &downloader{client: &http.Client{Transport: transport}, opts: opts, dir: dir,
		rng: rand.New(rand.NewSource(time.Now().UnixNano()))}

	var index []byte
	err = d.withRetries(ctx, func() (err error) {
		index, err = d.readIndex(ctx, base.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("index %s: %w", indexName, err)
	}
	names, err := shards.ShardNames(index)
	if err != nil {
		return err
	}

	// Workers, not a goroutine per shard: Concurrency goroutines take shards from a channel, so the
	// limit holds by construction and there is no semaphore to leak on an error path.
	work, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	jobs := make(chan string)
	workers := opts.Concurrency
	if len(names) < workers {
		workers = len(names)
	}
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				err := d.fetchShard(work, base, name)
				switch {
				case err == nil:
				case ctx.Err() != nil: // the caller's deadline or cancel: report that, whatever broke first
					fail(fmt.Errorf("shard %s: %w", name, ctx.Err()))
				case work.Err() == nil: // a real failure, not the echo of another worker's
					fail(fmt.Errorf("shard %s: %w", name, err))
				}
			}
		}()
	}
feed:
	for _, name := range names {
		select {
		case jobs <- name:
		case <-work.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeAtomically(filepath.Join(dir, indexName), index)
	// END SOLUTION
}

// BEGIN SOLUTION
type downloader struct {
	client *http.Client
	opts   Options
	dir    string
	mu     sync.Mutex // guards rng
	rng    *rand.Rand
}

// conns remembers every connection the transport dials, so that Download can close them all when it
// returns: CloseIdleConnections alone misses one whose dial completes after its request was cancelled,
// which the transport puts in its idle pool a moment later.
type conns struct {
	dialer *net.Dialer
	mu     sync.Mutex
	all    []net.Conn
	done   bool
}

func (c *conns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done { // Download has returned
		conn.Close()
		return nil, net.ErrClosed
	}
	c.all = append(c.all, conn)
	return conn, nil
}

func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	for _, conn := range c.all {
		conn.Close() // an error for one already closed: nothing to do
	}
}

// retryable marks an error worth another attempt, with the server's Retry-After (0 when none).
type retryable struct {
	err   error
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

var (
	errReadTimeout = errors.New("read timeout: no data")
	errBadRange    = errors.New("HTTP 416: the .part is longer than the file")
)

// withRetries runs attempt until it succeeds, fails for good, runs out of retries or ctx ends.
func (d *downloader) withRetries(ctx context.Context, attempt func() error) error {
	for n := 0; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		var again *retryable
		if !errors.As(err, &again) {
			return err
		}
		if n >= d.opts.Retries {
			return fmt.Errorf("%w (gave up after %d attempts)", err, n+1)
		}
		wait := d.backoff(n)
		if again.after > wait {
			wait = again.after
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// backoff draws the wait before retry n from [hi/2, hi] (shards.Options.Backoff).
func (d *downloader) backoff(n int) time.Duration {
	lo, hi := d.opts.Backoff(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	return lo + time.Duration(d.rng.Int63n(int64(hi-lo)+1))
}

// get sends one GET (from offset when > 0) and sorts the answer: a 200 or 206 is returned with its
// body wrapped in the read timeout, anything else is an error (retryable or final) and its body closed.
// The caller closes the body and calls stop.
func (d *downloader) get(ctx context.Context, target string, offset int64) (resp *http.Response, stop func(), err error) {
	attempt, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(attempt, http.MethodGet, target, nil)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err = d.client.Do(req)
	if err != nil { // refused, reset, header timeout: worth another try (the caller checks ctx first)
		cancel()
		return nil, nil, &retryable{err: err}
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		// drain a little so the connection can be reused, and always close
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && offset > 0 {
			return nil, nil, &retryable{err: errBadRange}
		}
		err := fmt.Errorf("HTTP %s", resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return nil, nil, &retryable{err: err, after: retryAfter(resp.Header.Get("Retry-After"))}
		}
		return nil, nil, err
	}
	idle := &idleReader{body: resp.Body, timeout: d.opts.ReadTimeout}
	idle.timer = time.AfterFunc(d.opts.ReadTimeout, func() { idle.expired.Store(true); cancel() })
	resp.Body = idle
	return resp, func() { idle.timer.Stop(); cancel() }, nil
}

// idleReader cancels its request when no byte arrives for timeout: net/http has no per-read timeout.
type idleReader struct {
	body    io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	expired atomic.Bool
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if n > 0 {
		r.timer.Reset(r.timeout)
	}
	if err != nil && err != io.EOF && r.expired.Load() {
		err = errReadTimeout
	}
	return n, err
}

func (r *idleReader) Close() error { return r.body.Close() }

func (d *downloader) readIndex(ctx context.Context, target string) ([]byte, error) {
	resp, stop, err := d.get(ctx, target, 0)
	if err != nil {
		return nil, err
	}
	defer stop()
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &retryable{err: err}
	}
	return data, nil
}

// fetchShard downloads one shard into NAME.part, resuming what an earlier attempt left, verifies it
// and renames it into place.
func (d *downloader) fetchShard(ctx context.Context, base *url.URL, name string) error {
	target := base.ResolveReference(&url.URL{Path: name}).String()
	final := filepath.Join(d.dir, name)
	part := final + ".part"
	var etag string
	err := d.withRetries(ctx, func() (err error) {
		etag, err = d.fetchInto(ctx, target, part)
		return err
	})
	if err != nil {
		return err
	}
	if etag != "" {
		got, err := sha256File(part)
		if err != nil {
			return err
		}
		if got != etag {
			os.Remove(part) // corrupt: a later run must not resume from it
			return fmt.Errorf("checksum mismatch: sha256 %s, X-Linked-Etag %s", got, etag)
		}
	}
	return os.Rename(part, final)
}

// fetchInto makes one attempt to complete part; it returns the X-Linked-Etag of the answer.
func (d *downloader) fetchInto(ctx context.Context, target, part string) (string, error) {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	offset, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	resp, stop, err := d.get(ctx, target, offset)
	if errors.Is(err, errBadRange) {
		if terr := f.Truncate(0); terr != nil {
			return "", terr
		}
	}
	if err != nil {
		return "", err
	}
	defer stop()
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK || contentRangeStart(resp.Header.Get("Content-Range")) != offset {
		// the server sends the whole file (or another range than asked): start over
		if err := f.Truncate(0); err != nil {
			return "", err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", &retryable{err: fmt.Errorf("asked for bytes %d- and got %q", offset, resp.Header.Get("Content-Range"))}
		}
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "", &retryable{err: err} // a reset, a cut body, a read timeout: resume from what arrived
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	// the Hub answers a LFS file with a 302 to its CDN and puts X-Linked-Etag on the 302, not on the file:
	// walk back through the redirects (Request.Response is the answer that led to each request)
	for r := resp; r != nil; r = r.Request.Response {
		if etag := linkedEtag(r.Header); etag != "" {
			return etag, nil
		}
	}
	return "", nil
}

// contentRangeStart is the first byte of "bytes START-END/SIZE", or -1.
func contentRangeStart(value string) int64 {
	if !strings.HasPrefix(value, "bytes ") {
		return -1
	}
	start, _, ok := strings.Cut(strings.TrimPrefix(value, "bytes "), "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(start, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// linkedEtag is the sha256 the Hub puts in X-Linked-Etag ("<hex>", maybe weak), lower case, or "".
func linkedEtag(h http.Header) string {
	value := strings.TrimPrefix(strings.TrimSpace(h.Get("X-Linked-Etag")), "W/")
	return strings.ToLower(strings.Trim(value, `"`))
}

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or unreadable.
func retryAfter(value string) time.Duration {
	if value == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil && secs > 0 && secs < 1e6 {
		return time.Duration(secs * float64(time.Second))
	}
	if when, err := http.ParseTime(value); err == nil {
		if wait := time.Until(when); wait > 0 {
			return wait
		}
	}
	return 0
}

func sha256File(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeAtomically writes data to NAME.part, syncs it and renames it to NAME.
func writeAtomically(name string, data []byte) error {
	part := name + ".part"
	if err := os.WriteFile(part, data, 0o644); err != nil {
		return err
	}
	f, err := os.Open(part)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		return err
	}
	return os.Rename(part, name)
}

// END SOLUTION
