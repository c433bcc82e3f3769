package javatest

import (
	"testing"

	"github.com/detour-proxy/detour/internal/testsupport"
)

// TestMain ends the binary without the race runtime's idle second at exit
// (testsupport.Main says when that is safe).
func TestMain(m *testing.M) { testsupport.Main(m) }
