// Exercise 19b: download a sharded checkpoint with a concurrency limit, timeouts, retries and clean
// cancellation, in Go's standard library. go/shards/solution/download.go is the worked answer; the
// learner's file, go/shards/exercise/download.go, is generated from it (python -m
// ringlab.course.make_exercises). Write Download there, test it from go/ with
// `go test -race ./shards/exercise`, and grade it with `ringlab check 19b`.
package exercise

import (
	"context"
	"errors"

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
	return errors.New("19b: not implemented: replace this line with your code")
}
