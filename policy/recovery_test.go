package policy

import (
	"slices"
	"testing"
	"time"
)

func TestBreakerRecoveryCompiles(t *testing.T) {
	t.Parallel()
	if got := compileParts(t, policyParts{}).Breaker.Recovery; got != 0 {
		t.Errorf("default recovery %s; want 0 (off)", got)
	}
	c := compileParts(t, policyParts{top: `"breaker": {"recovery": "90s"}`})
	if got := c.Breaker.Recovery; got != 90*time.Second {
		t.Errorf("recovery %s; want 90s", got)
	}
}

func TestBreakerRecoveryValidationErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    policyParts
		want []fieldErr
	}{
		{"negative", policyParts{top: `"breaker": {"recovery": "-1s"}`},
			[]fieldErr{{"breaker.recovery", `duration "-1s" must not be negative`}}},
		{"too long", policyParts{top: `"breaker": {"recovery": "25h"}`},
			[]fieldErr{{"breaker.recovery", "must be at most 24h0m0s; got 25h0m0s"}}},
		{"without a breaker", policyParts{top: `"breaker": {"enabled": false, "recovery": "1m"}`},
			[]fieldErr{{"breaker.recovery", "needs breaker.enabled: without a breaker nothing closes, so nothing ramps"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := compileErrs(t, tc.p); !slices.Equal(got, tc.want) {
				t.Errorf("errors %v; want %v", got, tc.want)
			}
		})
	}
}
