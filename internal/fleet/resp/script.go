package resp

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
)

// Script is a Lua script run on the server by its SHA1, so that each call
// sends 40 bytes rather than the source.
type Script struct {
	src, sha string
}

// NewScript prepares src; nothing is sent until Run.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(h[:])}
}

// SHA is the script's SHA1 in hex, as SCRIPT LOAD returns it.
func (s *Script) SHA() string { return s.sha }

// Run sends EVALSHA, and EVAL when the server does not have the script
// (NOSCRIPT: a restart, SCRIPT FLUSH, a failover); EVAL also caches it, so
// the next Run is an EVALSHA again. A script's error is an *Error.
func (s *Script) Run(ctx context.Context, c *Client, keys []string, args ...any) (Value, error) {
	v, err := c.Do(ctx, s.command("EVALSHA", s.sha, keys, args)...)
	if errors.Is(err, ErrNoScript) {
		return c.Do(ctx, s.command("EVAL", s.src, keys, args)...)
	}
	return v, err
}

// Eval is the EVAL command with the source, for a Pipeline: there a
// NOSCRIPT answer to EVALSHA comes back after the other commands were
// sent, too late to fall back.
func (s *Script) Eval(keys []string, args ...any) []any {
	return s.command("EVAL", s.src, keys, args)
}

func (s *Script) command(verb, script string, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, verb, script, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}
