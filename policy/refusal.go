package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// refusal is Compile's error for a policy that decoded but did not
// validate. Besides the problems it carries what the store needs to tell a
// new refusal from the same one again: the fingerprint of everything the
// compile read, and the files it referenced. The files matter because the
// fix may be a file the policy names rather than the policy itself (a key
// file that did not exist yet), and the watcher only reloads for files it
// knows the policy reads.
type refusal struct {
	Errors
	fingerprint string
	files       []string
}

// Unwrap lets errors.As find the Errors.
func (r *refusal) Unwrap() error { return r.Errors }

// refuse wraps the compile's errors with what it read.
func (k *compiler) refuse(errs Errors) error {
	return &refusal{Errors: errs, fingerprint: hex.EncodeToString(k.fp.Sum(nil)), files: k.c.Files}
}

// refusalOf returns the fingerprint of a refused compile of data and the
// files it referenced. Errors that are not a refusal (the file did not
// decode, or another CompileFunc) read nothing but data, so data and the
// reason identify them.
func refusalOf(data []byte, err error) (fingerprint string, files []string) {
	var r *refusal
	if errors.As(err, &r) {
		return r.fingerprint, r.files
	}
	h := sha256.New()
	h.Write(data)
	h.Write([]byte{0})
	h.Write([]byte(err.Error()))
	return hex.EncodeToString(h.Sum(nil)), nil
}
