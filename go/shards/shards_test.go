package shards

import (
	"strings"
	"testing"
	"time"
)

func TestShardNamesAreSortedDistinctAndPlain(t *testing.T) {
	names, err := ShardNames([]byte(`{"metadata": {"total_size": 8}, "weight_map": {
		"b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",
		"c": "model-00001-of-00002.safetensors"}}`))
	if err != nil || strings.Join(names, " ") != "model-00001-of-00002.safetensors model-00002-of-00002.safetensors" {
		t.Fatalf("got %v, %v", names, err)
	}
	for _, bad := range []string{`"../evil"`, `"a/b"`, `"a\\b"`, `".."`, `"."`, `""`} {
		if _, err := ShardNames([]byte(`{"weight_map": {"x": ` + bad + `}}`)); err == nil {
			t.Errorf("shard name %s accepted: an index must not write outside the destination", bad)
		}
	}
	for _, bad := range []string{`{}`, `{"weight_map": {}}`, `not json`} {
		if _, err := ShardNames([]byte(bad)); err == nil {
			t.Errorf("index %s accepted", bad)
		}
	}
}

func TestBackoffDoublesFromBaseUpToMax(t *testing.T) {
	o := Options{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		lo, hi := o.Backoff(n)
		if hi != want*time.Millisecond || lo != hi/2 {
			t.Errorf("Backoff(%d) = [%v, %v], want [%v, %v]", n, lo, hi, want*time.Millisecond/2, want*time.Millisecond)
		}
	}
	if lo, hi := o.Backoff(100); hi != time.Second || lo != hi/2 { // no overflow far out
		t.Errorf("Backoff(100) = [%v, %v]", lo, hi)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, change := range map[string]func(*Options){
		"Concurrency":    func(o *Options) { o.Concurrency = 0 },
		"ConnectTimeout": func(o *Options) { o.ConnectTimeout = 0 },
		"ReadTimeout":    func(o *Options) { o.ReadTimeout = -time.Second },
		"Retries":        func(o *Options) { o.Retries = -1 },
		"BackoffMax":     func(o *Options) { o.BackoffMax = o.BackoffBase / 2 },
	} {
		o := DefaultOptions()
		change(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s out of range: Validate() = %v", field, err)
		}
	}
}
