package solution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Regression: the Hub answers each LFS file with a 302 to its CDN and puts X-Linked-Etag on the 302.
// Download must follow it and check the file against that header: bytes that differ are refused.
func TestHubRedirectEtagIsChecked(t *testing.T) {
	body := []byte("the shard's bytes")
	sum := sha256.Sum256(body)
	index := `{"weight_map": {"w": "model-00001-of-00001.safetensors"}}`
	for _, tc := range []struct {
		name  string
		serve []byte
		ok    bool
	}{{"right bytes", body, true}, {"wrong bytes", []byte("other bytes, same len"), false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, ".index.json"):
					w.Write([]byte(index))
				case strings.HasPrefix(r.URL.Path, "/cdn/"):
					w.Write(tc.serve)
				default:
					w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
					http.Redirect(w, r, "/cdn"+r.URL.Path, http.StatusFound)
				}
			}))
			defer srv.Close()
			dir := t.TempDir()
			opts := Options{Concurrency: 2, ConnectTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
				Retries: 1, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Download(ctx, srv.URL+"/repo/model.safetensors.index.json", dir, opts)
			_, statErr := os.Stat(filepath.Join(dir, "model-00001-of-00001.safetensors"))
			if tc.ok && (err != nil || statErr != nil) {
				t.Fatalf("want the shard in place, got err %v, stat %v", err, statErr)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "checksum") || statErr == nil) {
				t.Fatalf("want a checksum error and no file, got err %v, stat %v", err, statErr)
			}
		})
	}
}
