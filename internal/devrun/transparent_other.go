//go:build !linux

package devrun

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"runtime"
)

// transparent is `detour run --transparent` where it cannot run.
type transparent struct{}

// startTransparent refuses --transparent: it needs Linux's cgroups and
// nftables.
func startTransparent(o TransparentOptions, _ uint32, _ io.Writer) (*transparent, error) {
	if !o.Enabled {
		return nil, nil
	}
	return nil, errors.New("detour run --transparent works only on Linux (it redirects CMD's cgroup with nftables), not on " +
		runtime.GOOS + ": run `detour run -- CMD` without it, and CMD reaches detour through HTTPS_PROXY")
}

func (*transparent) listeners() []net.Listener { return nil }

func (*transparent) attach(*exec.Cmd) {}

func (*transparent) stop() {}
