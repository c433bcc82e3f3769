package policy

import (
	"errors"
	"os"
	"strings"
)

// AdminFile configures who may use the admin listener beyond its probes.
//
// /healthz, /readyz and /metrics answer anyone who reaches admin_listen (the
// kubelet probes the pod IP). Everything else — /status, /policy/history and
// every endpoint that changes state, such as POST /policy/rollback — answers
// a caller on the loopback interface, or a caller that sends
// "Authorization: Bearer <token>" with the token this file holds.
type AdminFile struct {
	// TokenFile names a file holding the admin bearer token (surrounding
	// whitespace trimmed; it must not be empty). Relative paths are
	// resolved against the policy file's directory. The file is read at
	// every policy load, where a missing or empty file refuses the policy,
	// and again by the admin listener at most once a second, so that a
	// rotated token (a Kubernetes Secret) is in effect within a second
	// without a reload, and a rollback never brings an old token back.
	// Default none: only loopback callers may use the endpoints above.
	TokenFile string `json:"token_file,omitempty"`
}

// AdminPolicy is the compiled admin section.
type AdminPolicy struct {
	// TokenFile is the resolved path of admin.token_file; "" when none is
	// configured (only loopback callers get past the probes).
	TokenFile string
}

// ReadAdminToken reads an admin token file: its content with surrounding
// whitespace trimmed. An empty token is an error, since it would let in
// anyone who sends "Authorization: Bearer ".
func ReadAdminToken(path string) (Secret, error) {
	return readAdminToken(os.ReadFile, path)
}

// errEmptyToken is why an admin token file is refused when it holds nothing.
var errEmptyToken = errors.New("the file is empty")

func readAdminToken(read func(string) ([]byte, error), path string) (Secret, error) {
	b, err := read(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", errEmptyToken
	}
	return Secret(t), nil
}

// admin compiles the admin section. The token itself is not kept in the
// Compiled policy: the admin listener reads the file when it needs it, so
// the token in effect is always the file's (see AdminFile.TokenFile). It is
// read here only to refuse, at start or reload, a policy whose token file
// would lock every remote caller out. It is not part of the fingerprint
// either, for the same reason: a rotated token changes no compiled policy.
func (k *compiler) admin(a *AdminFile) {
	if a == nil {
		return
	}
	if a.TokenFile == "" {
		if k.present("admin.token_file") {
			k.errorf("admin.token_file", "must name a file holding the admin token, or be left out (then only loopback callers may use /status, /policy/history and /policy/rollback)")
		}
		return
	}
	path := k.resolve(a.TokenFile)
	if _, err := readAdminToken(k.opts.ReadFile, path); err != nil {
		k.errorf("admin.token_file", "cannot use admin token file %s: %v; write a random token into it (e.g. `openssl rand -hex 32 > %s`) or leave admin.token_file out", path, err, path)
		return
	}
	k.c.Admin = AdminPolicy{TokenFile: path}
}

// AdminTokenHint is what a caller refused for want of a token is told to
// do; the admin listener and `policy explain` say the same.
const AdminTokenHint = "set admin.token_file in the policy and send Authorization: Bearer <the file's token>"
