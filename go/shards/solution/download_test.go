package solution

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"ringlab.local/go/shards/shardstest"
)

func TestDownload(t *testing.T) { shardstest.Run(t, Download) }

// TestForeignPeerIsNotCounted: a stale ZeroMQ socket connecting to the server's port during a download
// (its greeting starts 0xFF) is hung up on at once and counted neither as a connection nor a leak.
func TestForeignPeerIsNotCounted(t *testing.T) {
	s := shardstest.NewServer(shardstest.Config{Shards: 4, Size: 4096})
	defer s.Close()
	peer, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write([]byte("\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f")); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := peer.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("want the server to hang up on a peer that does not speak HTTP; got %d bytes, %v", n, err)
	}
	if err := Download(context.Background(), s.IndexURL(), t.TempDir(), Options{Concurrency: 1, ConnectTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, Retries: 1, BackoffBase: 10 * time.Millisecond, BackoffMax: time.Second}); err != nil {
		t.Fatal(err)
	}
	if s.PeakConns() != 1 {
		t.Errorf("peak connections %d with Concurrency 1 and a foreign peer: want 1", s.PeakConns())
	}
}
