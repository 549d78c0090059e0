package solution

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	for value, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond,
		"-1": 0, "soon": 0, "Wed, 21 Oct 2015 07:28:00 GMT": 0} { // a date in the past: no wait
		if got := retryAfter(value); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", value, got, want)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := retryAfter(future); got < 59*time.Minute || got > time.Hour {
		t.Errorf("retryAfter(an hour from now) = %v", got)
	}
}

func TestContentRangeStartAndLinkedEtag(t *testing.T) {
	for value, want := range map[string]int64{"bytes 100-199/200": 100, "bytes 0-0/1": 0, "bytes */200": -1, "": -1} {
		if got := contentRangeStart(value); got != want {
			t.Errorf("contentRangeStart(%q) = %d, want %d", value, got, want)
		}
	}
	h := http.Header{}
	h.Set("X-Linked-Etag", `W/"ABCdef01"`) // the Hub quotes it; a proxy may weaken it
	if got := linkedEtag(h); got != "abcdef01" {
		t.Errorf("linkedEtag = %q", got)
	}
}
