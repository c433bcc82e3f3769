//go:build !unix

package javatest

import "io/fs"

// ownedByMe reports whether this process's user owns fi: without Unix
// owners, the temporary directory is the user's own.
func ownedByMe(fs.FileInfo) bool { return true }
