// Command fetch runs a Download of exercise 19b from the command line, against any server (ringlab
// shards serve prints an index URL to try):
//
//	go run ./shards/cmd/fetch [flags] INDEX_URL DEST
//
// -impl exercise (default) runs your go/shards/exercise/download.go, -impl solution the worked one.
// Ctrl-C cancels the download's context. Exit 0 when Download returns nil, 1 when it returns an
// error, 2 on a usage error. With -json it prints one line for ringlab's grader: the error, whether it
// wraps context.DeadlineExceeded or context.Canceled, the seconds taken, and the goroutines Download
// started that still run once -settle has passed; with -hold it then waits for its standard input to
// close before exiting, so the server can count the connections left open.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"ringlab.local/go/shards"
	"ringlab.local/go/shards/exercise"
	"ringlab.local/go/shards/solution"
)

type report struct {
	Error            *string `json:"error"`
	Deadline         bool    `json:"deadline"`
	Canceled         bool    `json:"canceled"`
	Seconds          float64 `json:"seconds"`
	GoroutinesBefore int     `json:"goroutines_before"`
	GoroutinesAfter  int     `json:"goroutines_after"`
	// The goroutines started during Download and still running after it: in the downloader's own code
	// (the innermost of its functions on each stack), in net/http's connection loops (a body never
	// closed, or idle connections kept), elsewhere.
	LeakedCode        []string `json:"leaked_code"`
	LeakedConnections int      `json:"leaked_connections"`
	LeakedOther       int      `json:"leaked_other"`
}

// goroutines maps the id of every goroutine but the caller's to its stack.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for i, stack := range strings.Split(string(buf), "\n\n") {
		if fields := strings.Fields(stack); i > 0 && len(fields) > 1 && fields[0] == "goroutine" {
			out[fields[1]] = stack
		}
	}
	return out
}

// started returns the stacks of the goroutines running now that were not in before.
func started(before map[string]string) []string {
	var out []string
	for id, stack := range goroutines() {
		if _, old := before[id]; !old {
			out = append(out, stack)
		}
	}
	return out
}

// classify fills the Leaked fields from the stacks of goroutines started during Download.
func (r *report) classify(stacks []string) {
	seen := map[string]bool{}
	for _, stack := range stacks {
		switch {
		case strings.Contains(stack, "ringlab.local/go/shards/exercise.") || strings.Contains(stack, "ringlab.local/go/shards/solution."):
			name := "a goroutine it started"
			for _, line := range strings.Split(stack, "\n") {
				if strings.HasPrefix(line, "ringlab.local/go/shards/") {
					name = line[strings.LastIndex(line, "/")+1:]
					if paren := strings.LastIndex(name, "("); paren > 0 {
						name = name[:paren]
					}
					break
				}
			}
			if !seen[name] {
				seen[name] = true
				r.LeakedCode = append(r.LeakedCode, name)
			}
		case strings.Contains(stack, "net/http.(*persistConn)"):
			r.LeakedConnections++
		default:
			r.LeakedOther++
		}
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	defaults := shards.DefaultOptions()
	flags := flag.NewFlagSet("fetch", flag.ContinueOnError)
	flags.SetOutput(stderr)
	impl := flags.String("impl", "exercise", "whose Download to run: exercise or solution")
	opts := defaults
	flags.IntVar(&opts.Concurrency, "concurrency", defaults.Concurrency, "most shards in flight at once")
	timeout := flags.Duration("timeout", 5*time.Minute, "overall deadline of the download")
	flags.DurationVar(&opts.ConnectTimeout, "connect-timeout", defaults.ConnectTimeout, "bound on each connect")
	flags.DurationVar(&opts.ReadTimeout, "read-timeout", defaults.ReadTimeout, "bound on each wait for data")
	flags.IntVar(&opts.Retries, "retries", defaults.Retries, "retries per shard after its first attempt")
	flags.DurationVar(&opts.BackoffBase, "backoff", defaults.BackoffBase, "wait before the first retry (doubles)")
	flags.DurationVar(&opts.BackoffMax, "backoff-max", defaults.BackoffMax, "longest wait between retries")
	asJSON := flags.Bool("json", false, "print one JSON line for ringlab's grader")
	settle := flags.Duration("settle", 5*time.Second, "with -json: how long to wait for goroutines to end")
	hold := flags.Bool("hold", false, "with -json: exit only when standard input closes")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	download := map[string]func(context.Context, string, string, shards.Options) error{
		"exercise": exercise.Download, "solution": solution.Download}[*impl]
	switch {
	case download == nil:
		fmt.Fprintf(stderr, "fetch: -impl must be exercise or solution, got %q\n", *impl)
		return 2
	case flags.NArg() != 2:
		fmt.Fprintln(stderr, "fetch: usage: fetch [flags] INDEX_URL DEST")
		return 2
	case *timeout <= 0:
		fmt.Fprintf(stderr, "fetch: -timeout must be > 0, got %v\n", *timeout)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	before, stacks := runtime.NumGoroutine(), goroutines()
	start := time.Now()
	err := download(ctx, flags.Arg(0), flags.Arg(1), opts)
	took := time.Since(start)
	if !*asJSON {
		if err != nil {
			fmt.Fprintf(stderr, "fetch: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "fetched %s into %s in %.1f s\n", flags.Arg(0), flags.Arg(1), took.Seconds())
		return 0
	}
	// Wait for the goroutines Download started (told by id, not by count: the signal handler's may end too)
	end := time.Now().Add(*settle)
	left := started(stacks)
	for len(left) > 0 && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
		left = started(stacks)
	}
	out := report{Deadline: errors.Is(err, context.DeadlineExceeded), Canceled: errors.Is(err, context.Canceled),
		Seconds: took.Seconds(), GoroutinesBefore: before, GoroutinesAfter: runtime.NumGoroutine(), LeakedCode: []string{}}
	out.classify(left)
	if err != nil {
		text := err.Error()
		out.Error = &text
	}
	line, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(line))
	if *hold {
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	if err != nil {
		return 1
	}
	return 0
}
