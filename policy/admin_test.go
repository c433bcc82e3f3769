package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withAdmin inserts an admin section into goodPolicy.
func withAdmin(section string) string {
	return strings.Replace(goodPolicy, `"version": "t1",`, `"version": "t1", "admin": `+section+`,`, 1)
}

// TestAdminTokenFile: admin.token_file is resolved against the policy's
// directory, and a missing or empty file, or an empty name, refuses the
// policy with an error that names the field and says what to do.
func TestAdminTokenFile(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"/etc/detour/admin-token":  "s3cret-token\n",
		"/run/secrets/admin/token": "other",
		"/etc/detour/empty-token":  " \n\t",
	}
	opts := testOptions()
	var read []string
	opts.ReadFile = func(p string) ([]byte, error) {
		read = append(read, p)
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	for _, tc := range []struct {
		name, section string
		want          string // TokenFile, or the error's text
		wantErr       bool
	}{
		{"absent", "", "", false},
		{"empty section", `{}`, "", false},
		{"relative", `{"token_file": "admin-token"}`, "/etc/detour/admin-token", false},
		{"absolute", `{"token_file": "/run/secrets/admin/token"}`, "/run/secrets/admin/token", false},
		{"missing file", `{"token_file": "nope"}`, `admin.token_file: cannot use admin token file /etc/detour/nope: open /etc/detour/nope: file does not exist; write a random token into it`, true},
		{"empty file", `{"token_file": "empty-token"}`, `admin.token_file: cannot use admin token file /etc/detour/empty-token: the file is empty`, true},
		{"empty name", `{"token_file": ""}`, `admin.token_file: must name a file holding the admin token, or be left out`, true},
		{"unknown field", `{"token": "s3cret"}`, `admin.token`, true},
	} {
		pol := goodPolicy
		if tc.section != "" {
			pol = withAdmin(tc.section)
		}
		c, err := Compile("/etc/detour/policy.json", []byte(pol), opts)
		if tc.wantErr {
			var es Errors
			if !errors.As(err, &es) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v; want one containing %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.Admin.TokenFile != tc.want {
			t.Errorf("%s: TokenFile %q; want %q", tc.name, c.Admin.TokenFile, tc.want)
		}
	}
	// The token never lands in the compiled policy, nor among the files
	// whose change reloads it: a rotated token changes no policy.
	c, err := Compile("/etc/detour/policy.json", []byte(withAdmin(`{"token_file": "admin-token"}`)), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Files {
		if f == "/etc/detour/admin-token" {
			t.Errorf("the token file is among the policy's watched files %q", c.Files)
		}
	}
	files["/etc/detour/admin-token"] = "rotated"
	c2, err := Compile("/etc/detour/policy.json", []byte(withAdmin(`{"token_file": "admin-token"}`)), opts)
	if err != nil || c2.Fingerprint != c.Fingerprint {
		t.Errorf("a rotated token changed the fingerprint (%v)", err)
	}
}

func TestReadAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	os.WriteFile(good, []byte("  tok-123\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	if tok, err := ReadAdminToken(good); err != nil || tok != "tok-123" {
		t.Errorf("ReadAdminToken = %q, %v; want the trimmed token", string(tok), err)
	}
	if _, err := ReadAdminToken(empty); err == nil {
		t.Error("an empty token file was accepted")
	}
	if _, err := ReadAdminToken(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
