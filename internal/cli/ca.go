package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/detour-proxy/detour/internal/mitm"
	"github.com/detour-proxy/detour/policy"
)

const caSynopsis = `detour ca init   [--policy FILE | --cert FILE --key FILE]   create detour's CA (an existing one is kept)
       detour ca print  [--policy FILE | --cert FILE]                print its certificate (PEM)
       detour ca bundle [--policy FILE | --cert FILE] [--out FILE]   the system roots + detour's CA, for apps to trust`

// CA runs `detour ca init | print | bundle`. builtin is the embedded
// default policy, whose CA location is used when no policy is named.
func CA(builtin []byte) Command {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) == 0 {
			fmt.Fprintf(stderr, "detour ca: which one? init, print or bundle\nusage: %s\n", caSynopsis)
			return ErrUsage
		}
		sub, args := args[0], args[1:]
		if isHelp(sub) {
			// The three subcommands share one set of flags: init's usage
			// is the whole command's.
			sub, args = "init", []string{"--help"}
		}
		if sub != "init" && sub != "print" && sub != "bundle" {
			fmt.Fprintf(stderr, "detour ca: unknown subcommand %q (init, print, bundle)\nusage: %s\n", sub, caSynopsis)
			return ErrUsage
		}
		fs := newFlags("ca "+sub, caSynopsis, stderr)
		policyPath := fs.String("policy", "", "take the CA files from this policy (default ./policy.json, else the built-in policy)")
		certFile := fs.String("cert", "", "CA certificate file (instead of --policy)")
		keyFile := fs.String("key", "", "CA key file (init only)")
		out := fs.String("out", "", "bundle: write here instead of standard output")
		if help, err := parse(fs, args, stdout); help || err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
		}
		cert, key := *certFile, *keyFile
		if cert == "" {
			var err error
			cert, key, err = caPathsFromPolicy(*policyPath, builtin)
			if err != nil {
				return err
			}
		}
		switch sub {
		case "init":
			if key == "" {
				return usageError(fs, stderr, "init needs both --cert and --key (or a policy)")
			}
			ca, created, warnings, err := mitm.LoadOrCreate(cert, key)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(stderr, "warning:", w)
			}
			verb := "exists"
			if created {
				verb = "created"
			}
			fmt.Fprintf(stdout, "CA %s: %s (key %s)\nsubject: %s, valid until %s\n", verb, cert, key, ca.Cert.Subject, ca.Cert.NotAfter.Format("2006-01-02"))
			fmt.Fprintf(stdout, "apps trust it with a bundle: detour ca bundle --cert %s --out bundle.pem\n", cert)
			return nil
		case "print":
			ca, err := loadCert(cert)
			if err != nil {
				return err
			}
			_, err = stdout.Write(ca.CertPEM)
			return err
		case "bundle":
			ca, err := loadCert(cert)
			if err != nil {
				return err
			}
			if *out == "" {
				return mitm.WriteBundle(stdout, ca, true)
			}
			return writeBundleFile(*out, ca)
		default:
			fmt.Fprintf(stderr, "detour ca: unknown subcommand %q (init, print, bundle)\nusage: %s\n", sub, caSynopsis)
			return ErrUsage
		}
	}
}

func caPathsFromPolicy(path string, builtin []byte) (cert, key string, err error) {
	name, data := "built-in policy.json", builtin
	if path == "" {
		if _, err := os.Stat("policy.json"); err == nil {
			path = "policy.json"
		}
	}
	if path != "" {
		if data, err = os.ReadFile(path); err != nil {
			return "", "", fmt.Errorf("reading policy: %w", err)
		}
		name = path
	}
	opts := policy.Options{}
	if path == "" {
		opts.BaseDir = "."
	}
	return policy.CAPaths(name, data, opts)
}

// loadCert reads a CA certificate without its key: printing and bundling
// need only the public half, which is what apps (and their containers) get.
func loadCert(path string) (*mitm.CA, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no CA certificate at %s: create one with `detour ca init` (or start `detour serve` once)", path)
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !c.IsCA {
		return nil, fmt.Errorf("%s: not a CA certificate", path)
	}
	return &mitm.CA{Cert: c, CertPEM: pem.EncodeToMemory(block)}, nil
}

// writeBundleFile writes the bundle next to its destination and renames it
// into place, so an app starting meanwhile never reads half a bundle.
func writeBundleFile(path string, ca *mitm.CA) error {
	if os.Getenv("SSL_CERT_FILE") != "" {
		if same, _ := sameFile(path, os.Getenv("SSL_CERT_FILE")); same {
			return fmt.Errorf("refusing to overwrite %s: SSL_CERT_FILE names it, and the system roots are read from it", path)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".detour-bundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := mitm.WriteBundle(tmp, ca, true); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
