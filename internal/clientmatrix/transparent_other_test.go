//go:build !linux

package clientmatrix

import "testing"

// transparentWay needs Linux: network namespaces and nftables.
func transparentWay(t *testing.T, _ []*client) *way {
	t.Skip("skipped: transparent mode needs Linux (network namespaces, nftables)")
	return nil
}
