package solution

import (
	"testing"

	"ringlab.local/go/shards/shardstest"
)

func TestDownload(t *testing.T) { shardstest.Run(t, Download) }
