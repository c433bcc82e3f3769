package resp

import (
	"context"
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// BenchmarkRoundTrip measures one command's round trip to a loopback
// redis-server and what it allocates: EXISTS (the monitor's check) and a
// script by SHA (the shape of every fleet-wide decision).
//
//	go test ./internal/fleet/resp -run '^$' -bench RoundTrip -benchmem -count 5
func BenchmarkRoundTrip(b *testing.B) {
	r := testsupport.StartRedis(b)
	o, err := ParseURL(r.URL())
	if err != nil {
		b.Fatal(err)
	}
	c := New(o)
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Do(ctx, "SET", "detour:marker", "m0"); err != nil {
		b.Fatal(err)
	}
	b.Run("EXISTS", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := c.Do(ctx, "EXISTS", "detour:marker")
			if err != nil || v.Int != 1 {
				b.Fatal(v, err)
			}
		}
	})
	sc := NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	b.Run("EVALSHA", func(b *testing.B) {
		b.ReportAllocs()
		ctx, cancel := context.WithCancel(ctx) // as fleet's calls have
		defer cancel()
		for b.Loop() {
			if _, err := sc.Run(ctx, c, []string{"detour:n"}, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
