package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/detour-proxy/detour/internal/cidr"
	"github.com/detour-proxy/detour/internal/redirect"
)

const redirectSynopsis = `detour redirect install --to-port PORT [--ports 443,80] [--exclude-uid UID] [--exclude-mark MARK] [--exclude-cidr CIDR]...
       detour redirect remove
       detour redirect show`

// Redirect runs `detour redirect install | remove | show`: the nftables
// rules that send this network namespace's outbound connections to
// detour's transparent listener (the policy's transparent.listen).
func Redirect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "detour redirect: which one? install, remove or show\nusage: %s\n", redirectSynopsis)
		return ErrUsage
	}
	switch sub, args := args[0], args[1:]; {
	case isHelp(sub):
		fmt.Fprint(stdout, "detour redirect: send this network namespace's outbound TCP connections to detour's transparent listener\n"+
			"(nftables table inet detour, programmed over netlink; needs CAP_NET_ADMIN).\n\n")
		for _, f := range []func([]string, io.Writer, io.Writer) error{redirectInstall, redirectRemove, redirectShow} {
			if err := f([]string{"--help"}, stdout, stderr); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		return nil
	case sub == "install":
		return redirectInstall(args, stdout, stderr)
	case sub == "remove":
		return redirectRemove(args, stdout, stderr)
	case sub == "show":
		return redirectShow(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "detour redirect: unknown subcommand %q (install, remove, show)\nusage: %s\n", sub, redirectSynopsis)
		return ErrUsage
	}
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func redirectInstall(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redirect install", "detour redirect install --to-port PORT [--ports 443,80] [--exclude-uid UID] [--exclude-mark MARK] [--exclude-cidr CIDR]...", stderr)
	toPort := fs.Uint("to-port", 0, "the transparent listener's port (the policy's transparent.listen); required")
	ports := fs.String("ports", "443,80", "TCP destination ports to redirect, comma-separated")
	var uids, marks, cidrs listFlag
	fs.Var(&uids, "exclude-uid", "a uid whose connections pass unredirected: detour's own (repeatable)")
	fs.Var(&marks, "exclude-mark", "a socket mark whose connections pass unredirected: the policy's transparent.mark, decimal or 0x hex (repeatable)")
	fs.Var(&cidrs, "exclude-cidr", "a destination range that passes unredirected, beside loopback and link-local (repeatable)")
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if *toPort == 0 || *toPort > 65535 {
		return usageError(fs, stderr, "--to-port is required: the port of the policy's transparent.listen (e.g. 15001)")
	}
	r := redirect.Rules{ToPort: uint16(*toPort)}
	var err error
	if r.Ports, err = redirect.ParsePorts(*ports); err != nil {
		return usageError(fs, stderr, "--ports: %v", err)
	}
	for _, u := range uids {
		n, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			return usageError(fs, stderr, "--exclude-uid %q: want a numeric uid", u)
		}
		r.ExcludeUIDs = append(r.ExcludeUIDs, uint32(n))
	}
	for _, m := range marks {
		n, err := strconv.ParseUint(m, 0, 32)
		if err != nil || n == 0 {
			return usageError(fs, stderr, "--exclude-mark %q: want a socket mark from 1 to 4294967295 (decimal or 0x hex)", m)
		}
		r.ExcludeMarks = append(r.ExcludeMarks, uint32(n))
	}
	for _, c := range cidrs {
		p, err := cidr.Parse(c)
		if err != nil {
			return usageError(fs, stderr, "--exclude-cidr: %v", err)
		}
		r.ExcludeCIDRs = append(r.ExcludeCIDRs, p)
	}
	if len(r.ExcludeUIDs) == 0 && len(r.ExcludeMarks) == 0 {
		// Without one, detour's own upstream calls come back to it.
		fmt.Fprintln(stderr, "detour redirect install: warning: no --exclude-uid or --exclude-mark: detour's own connections will be redirected back to it unless it runs in another network namespace")
	}
	if err := redirect.Install(r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "installed: TCP ports %s redirected to :%d (nftables table inet %s)\n", *ports, r.ToPort, redirect.TableName)
	return nil
}

func redirectRemove(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redirect remove", "detour redirect remove", stderr)
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if err := redirect.Remove(0); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed: no redirect rules (nftables table inet %s is gone)\n", redirect.TableName)
	return nil
}

func redirectShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("redirect show", "detour redirect show", stderr)
	if help, err := parse(fs, args, stdout); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	rules, err := redirect.Show(0)
	if err != nil {
		return err
	}
	if len(rules) == 0 {
		fmt.Fprintf(stderr, "no redirect rules (nftables table inet %s is absent)\n", redirect.TableName)
		return nil
	}
	fmt.Fprintf(stdout, "table inet %s, chain %s (nat, output):\n", redirect.TableName, redirect.ChainName)
	for _, r := range rules {
		fmt.Fprintf(stdout, "  %s  # handle %d\n", r.Text, r.Handle)
	}
	return nil
}

var _ flag.Value = (*listFlag)(nil)
