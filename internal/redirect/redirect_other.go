//go:build !linux

package redirect

import (
	"fmt"
	"runtime"
)

// errNotLinux is every call's answer off Linux: the rules are nftables,
// which only the Linux kernel has. detour's other commands build and run
// everywhere; only the transparent ways in need Linux.
var errNotLinux = fmt.Errorf("redirect rules are nftables, which only Linux has (this is %s): on this system use `detour run` without --transparent, or HTTPS_PROXY", runtime.GOOS)

// Install is not available off Linux.
func Install(Rules) error { return errNotLinux }

// Remove is not available off Linux.
func Remove(int) error { return errNotLinux }

// Show is not available off Linux.
func Show(int) ([]Rule, error) { return nil, errNotLinux }

// InstallCgroup is not available off Linux.
func InstallCgroup(CgroupRules) error { return errNotLinux }

// RemoveTable is not available off Linux.
func RemoveTable(string) error { return errNotLinux }

// ListRunTables is not available off Linux.
func ListRunTables() ([]RunTable, error) { return nil, errNotLinux }

// ShowTable is not available off Linux.
func ShowTable(string) ([]Rule, error) { return nil, errNotLinux }
