// Package shardstest tests any Download of exercise 19b against a fault-injecting shard server
// (net/http/httptest), the same faults as ringlab's Python server (ringlab shards serve): latency,
// throttled bytes, a stall mid-body, a connection reset, 5xx/429 with Retry-After, a truncated body,
// wrong bytes, 404/403. The server records what the checks need: requests in flight and connections
// open (now and at peak), and every request per file with its Range header and times.
package shardstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringlab.local/go/shards"
)

// Fault is what the server does to one answer for one file. The zero Fault serves the file.
type Fault struct {
	Status      int           // answer this status and no body (0: serve the file)
	RetryAfter  string        // the Retry-After header sent with Status
	Latency     time.Duration // wait before the headers
	BytesPerSec int           // throttle the body (0: as fast as the connection goes)
	StallAfter  int64         // with Stall: send this many body bytes, then stop sending for Stall
	Stall       time.Duration //   (or until the client goes)
	Cut         string        // "reset" (RST) or "truncate" (a clean close) after CutAt body bytes
	CutAt       int64
	WrongBytes  bool // flip one byte of the body; X-Linked-Etag still gives the right sha256
	Repeat      bool // apply to every later attempt too (a permanent fault)
}

// Request is one request the server received for a file.
type Request struct {
	Range      string    // its Range header ("" if none)
	Start, End time.Time // when the handler started and returned
}

// Config describes a server: the checkpoint it generates and the faults it injects.
type Config struct {
	Shards, Size int   // Shards shards of Size bytes each
	Seed         int64 // of the shards' content
	// Faults[name] scripts the answers to that shard's first, second... requests; later ones are
	// served normally unless the last fault has Repeat.
	Faults map[string][]Fault
	NoEtag bool   // send no X-Linked-Etag
	Gate   int    // hold each answer until this many requests are in flight (0: no gate)
	OnGate func() // called once, when Gate requests are first in flight
}

// ShardName is the name of shard i (from 0) of n, as Hugging Face names them.
func ShardName(i, n int) string { return fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n) }

// gateMax bounds the wait at the gate, should fewer requests than Gate ever come.
const gateMax = 10 * time.Second

// Server serves a generated checkpoint (its index and shards) with scripted faults.
type Server struct {
	*httptest.Server
	Config
	Files  map[string][]byte // file name -> content (the index and the shards)
	Shards []string          // shard names, sorted

	mu             sync.Mutex
	requests       map[string][]Request
	inflight, peak int
	open, peakOpen int
	active         map[net.Conn]bool // connections that have carried a request: the ones counted
	gateOnce       sync.Once
	gateOpen       chan struct{}
	handlerCtx     context.Context // done when the server closes: ends stalls and latencies
	cancelHandlers context.CancelFunc
	closeOnce      sync.Once
}

// NewServer starts a server as cfg describes. Close it when done.
func NewServer(cfg Config) *Server {
	rng := rand.New(rand.NewSource(cfg.Seed))
	s := &Server{Config: cfg, Files: map[string][]byte{}, requests: map[string][]Request{},
		gateOpen: make(chan struct{}), active: map[net.Conn]bool{}}
	weightMap := map[string]string{}
	n := cfg.Shards
	for i := 0; i < n; i++ {
		name := ShardName(i, n)
		data := make([]byte, cfg.Size)
		rng.Read(data)
		s.Files[name] = data
		s.Shards = append(s.Shards, name)
		weightMap[fmt.Sprintf("model.layers.%d.weight", i)] = name
	}
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": n * cfg.Size},
		"weight_map": weightMap})
	s.Files[shards.IndexName] = index
	s.handlerCtx, s.cancelHandlers = context.WithCancel(context.Background())
	s.Server = httptest.NewUnstartedServer(s)
	s.Server.Listener = httpOnly{s.Server.Listener}
	s.Server.Config.ConnState = s.connState
	s.Server.Start()
	return s
}

// IndexURL is the URL of the index.
func (s *Server) IndexURL() string { return s.URL + "/" + shards.IndexName }

// Close ends stalled handlers, then closes the server.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancelHandlers()
		s.Server.Close()
	})
}

// httpOnly hangs up on a peer whose first byte cannot start an HTTP request. The port is an ephemeral one, and
// a stale ZeroMQ socket of a Jupyter kernel that is gone may reconnect to it every 100 ms and send its greeting
// (0xFF ...); net/http would wait for that greeting's first line forever, in a goroutine the leak check counts.
type httpOnly struct{ net.Listener }

func (l httpOnly) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &firstByteConn{Conn: c}, nil
}

type firstByteConn struct {
	net.Conn
	checked atomic.Bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.checked.Swap(true) && !(p[0] >= 'A' && p[0] <= 'Z' || p[0] == '\r' || p[0] == '\n') {
		return 0, io.EOF // no byte reaches net/http: the connection never becomes active, and is closed silently
	}
	return n, err
}

// connState counts a connection from its first request, not from its accept, so a foreign peer is never
// counted as the client's.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateActive:
		if !s.active[c] {
			s.active[c] = true
			s.open++
			if s.open > s.peakOpen {
				s.peakOpen = s.open
			}
		}
	case http.StateClosed, http.StateHijacked:
		if s.active[c] {
			delete(s.active, c)
			s.open--
		}
	}
}

// Peak is the most requests in flight at once; PeakConns the most connections open at once.
func (s *Server) Peak() int      { s.mu.Lock(); defer s.mu.Unlock(); return s.peak }
func (s *Server) PeakConns() int { s.mu.Lock(); defer s.mu.Unlock(); return s.peakOpen }

// InFlight is the number of requests being answered now.
func (s *Server) InFlight() int { s.mu.Lock(); defer s.mu.Unlock(); return s.inflight }

// OpenConns is the number of connections open now.
func (s *Server) OpenConns() int { s.mu.Lock(); defer s.mu.Unlock(); return s.open }

// Requests returns a copy of the requests received for a file, in order.
func (s *Server) Requests(name string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests[name]...)
}

// Sha256 is the hex sha256 of a file's true content.
func (s *Server) Sha256(name string) string {
	sum := sha256.Sum256(s.Files[name])
	return hex.EncodeToString(sum[:])
}

func (s *Server) begin(name, rangeHeader string) (Fault, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	attempt := len(s.requests[name])
	s.requests[name] = append(s.requests[name], Request{Range: rangeHeader, Start: time.Now()})
	s.inflight++
	if s.inflight > s.peak {
		s.peak = s.inflight
	}
	if s.Gate > 0 && name != shards.IndexName && s.inflight >= s.Gate {
		s.gateOnce.Do(func() {
			close(s.gateOpen)
			if s.OnGate != nil {
				go s.OnGate()
			}
		})
	}
	script := s.Faults[name]
	switch {
	case attempt < len(script):
		return script[attempt], attempt
	case len(script) > 0 && script[len(script)-1].Repeat:
		return script[len(script)-1], attempt
	}
	return Fault{}, attempt
}

func (s *Server) end(name string, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	s.requests[name][attempt].End = time.Now()
}

// wait sleeps d, or less if the client goes or the server closes; false when it was cut short.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.Context().Done():
	case <-s.handlerCtx.Done():
	}
	return false
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	fault, attempt := s.begin(name, r.Header.Get("Range"))
	defer s.end(name, attempt)
	if s.Gate > 0 && name != shards.IndexName {
		select {
		case <-s.gateOpen:
		case <-time.After(gateMax):
		case <-r.Context().Done():
			return
		}
	}
	data, ok := s.Files[name]
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if fault.Latency > 0 && !s.wait(r, fault.Latency) {
		return
	}
	if fault.Status != 0 {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		http.Error(w, http.StatusText(fault.Status), fault.Status)
		return
	}
	if fault.WrongBytes {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	if !s.NoEtag {
		h.Set("X-Linked-Etag", `"`+s.Sha256(name)+`"`)
	}
	start := int64(0)
	if spec := r.Header.Get("Range"); spec != "" {
		first, _, _ := strings.Cut(strings.TrimPrefix(spec, "bytes="), "-")
		n, err := strconv.ParseInt(first, 10, 64)
		if err != nil || n < 0 || n >= int64(len(data)) {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
	}
	body := data[start:]
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	s.writeBody(w, r, body, fault)
}

// writeBody sends body in chunks, applying the throttle, the stall and the cut of fault.
func (s *Server) writeBody(w http.ResponseWriter, r *http.Request, body []byte, fault Fault) {
	const chunk = 8 << 10
	flusher, _ := w.(http.Flusher)
	sent, stalled := int64(0), false
	for sent < int64(len(body)) {
		if fault.Stall > 0 && !stalled && sent >= fault.StallAfter {
			stalled = true
			flusher.Flush()
			if !s.wait(r, fault.Stall) {
				return
			}
		}
		if fault.Cut != "" && sent >= fault.CutAt {
			s.cut(w, fault.Cut)
			return
		}
		n := int64(chunk)
		for _, limit := range []int64{int64(len(body)) - sent, fault.StallAfter - sent, fault.CutAt - sent} {
			if limit > 0 && limit < n {
				n = limit
			}
		}
		if _, err := w.Write(body[sent : sent+n]); err != nil {
			return
		}
		sent += n
		if fault.BytesPerSec > 0 {
			flusher.Flush()
			if !s.wait(r, time.Duration(float64(n)/float64(fault.BytesPerSec)*float64(time.Second))) {
				return
			}
		}
	}
}

// cut ends the answer early: "truncate" returns with bytes missing (net/http then closes the
// connection cleanly); "reset" takes the connection over and closes it with an RST.
func (s *Server) cut(w http.ResponseWriter, how string) {
	w.(http.Flusher).Flush()
	if how != "reset" {
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	_ = buf.Flush()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close sends RST, not FIN
	}
	conn.Close()
}
