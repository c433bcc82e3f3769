package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestFleetTable: with memory state every member of the fleet wastes a
// call on the exhausted primary; sharing state through Redis, never more
// (a member's own cooldown stops it after its first 429) and at least the
// one that found out. How many fewer depends on how fast the cooldown
// propagates on this machine, so it is logged, not asserted: the fleet
// package's tests prove the propagation itself, waiting for it.
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
		if row.shared < 1 || row.shared > row.memory {
			t.Errorf("%d members, redis: %d wasted calls; want between 1 and memory's %d", row.members, row.shared, row.memory)
		}
		t.Logf("%d members: %d wasted calls with memory, %d with redis", row.members, row.memory, row.shared)
	}
	var out bytes.Buffer
	res.write(&out)
	if !strings.Contains(out.String(), "| 50 ") {
		t.Errorf("table lacks the 50-member row:\n%s", out.String())
	}
}
