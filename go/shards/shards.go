// Package shards holds what every downloader of a sharded checkpoint in this module shares: the
// Options of exercise 19b and the index format.
//
// A checkpoint is laid out as Hugging Face lays it out: model.safetensors.index.json, whose
// "weight_map" maps each tensor name to the shard file holding it, and the shards beside it. Each shard
// response carries the file's sha256 in X-Linked-Etag, as the Hub does for LFS files
// (https://huggingface.co/docs/huggingface_hub/guides/download), and answers Range requests with 206.
//
// The worked solution is go/shards/solution/download.go; the learner writes
// go/shards/exercise/download.go (generated from it); the package shardstest tests either.
package shards

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// Options tunes a download. The overall deadline is not here: it is the deadline of the context
// given to Download.
type Options struct {
	// Concurrency is the most shards in flight at once, hence the most connections open (>= 1).
	Concurrency int
	// ConnectTimeout bounds establishing one TCP connection (> 0).
	ConnectTimeout time.Duration
	// ReadTimeout bounds every wait for data: the response headers, then each read of the body (> 0).
	// A transfer that keeps delivering bytes is never cut, however long it takes.
	ReadTimeout time.Duration
	// Retries is the number of attempts per shard after the first (>= 0). Only 5xx, 429, connection
	// errors (resets, truncated bodies) and read timeouts are retried; any other 4xx is final.
	Retries int
	// Before retry n (n = 0, 1, ...) a downloader waits a random time in [d/2, d] with
	// d = min(BackoffMax, BackoffBase * 2^n) ("equal jitter"), and at least the server's Retry-After.
	BackoffBase, BackoffMax time.Duration
}

// DefaultOptions are the options of the course's examples: 8 connections, 10 s to connect, 30 s
// without a byte, 5 retries backing off from 0.5 s to 8 s.
func DefaultOptions() Options {
	return Options{Concurrency: 8, ConnectTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		Retries: 5, BackoffBase: 500 * time.Millisecond, BackoffMax: 8 * time.Second}
}

// Validate returns an error naming the first field out of range, or nil.
func (o Options) Validate() error {
	switch {
	case o.Concurrency < 1:
		return fmt.Errorf("Options.Concurrency must be >= 1, got %d", o.Concurrency)
	case o.ConnectTimeout <= 0:
		return fmt.Errorf("Options.ConnectTimeout must be > 0, got %v", o.ConnectTimeout)
	case o.ReadTimeout <= 0:
		return fmt.Errorf("Options.ReadTimeout must be > 0, got %v", o.ReadTimeout)
	case o.Retries < 0:
		return fmt.Errorf("Options.Retries must be >= 0, got %d", o.Retries)
	case o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase:
		return fmt.Errorf("Options.BackoffBase and BackoffMax must satisfy 0 <= BackoffBase <= BackoffMax, got %v and %v",
			o.BackoffBase, o.BackoffMax)
	}
	return nil
}

// Backoff returns the range [lo, hi] of the wait before retry n (n = 0 for the first retry) without
// Retry-After: hi = min(BackoffMax, BackoffBase * 2^n), lo = hi/2.
func (o Options) Backoff(n int) (lo, hi time.Duration) {
	hi = o.BackoffMax
	if n < 62 && o.BackoffBase<<n > 0 && o.BackoffBase<<n < hi {
		hi = o.BackoffBase << n
	}
	return hi / 2, hi
}

// IndexName is the file name of a sharded safetensors checkpoint's index.
const IndexName = "model.safetensors.index.json"

// ShardNames parses an index (JSON with a "weight_map" object from tensor names to shard file names)
// and returns the distinct shard names, sorted. A name that is not a plain file name (empty, with a
// slash or backslash, "." or "..") is refused: an index must not write outside the destination.
func ShardNames(index []byte) ([]string, error) {
	var parsed struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &parsed); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if len(parsed.WeightMap) == 0 {
		return nil, fmt.Errorf("index: no weight_map, or an empty one")
	}
	seen := map[string]bool{}
	var names []string
	for _, name := range parsed.WeightMap {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || path.Base(name) != name {
			return nil, fmt.Errorf("index: shard name %q is not a plain file name", name)
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}
