package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestFleetTable: with memory state every member of the fleet wastes a
// call on the exhausted primary; sharing state through Redis, the fleet
// wastes fewer than it has members.
func TestFleetTable(t *testing.T) {
	t.Parallel()
	r := testsupport.StartRedis(t)
	res, err := runFleet(context.Background(), Options{Seed: 1, RedisURL: r.URL()}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.rows {
		if row.memory != row.members {
			t.Errorf("%d members, memory: %d wasted calls; want one per member", row.members, row.memory)
		}
		if row.members >= 10 && row.shared >= row.memory {
			t.Errorf("%d members, redis: %d wasted calls; want fewer than memory's %d", row.members, row.shared, row.memory)
		}
	}
	var out bytes.Buffer
	res.write(&out)
	if !strings.Contains(out.String(), "| 50 ") {
		t.Errorf("table lacks the 50-member row:\n%s", out.String())
	}
}
