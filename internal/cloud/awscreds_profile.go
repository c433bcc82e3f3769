package cloud

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// awsProfile is what detour reads of one profile of the shared config and
// credentials files: the keys that say where its credentials come from.
// Keys are lower case, values unquoted.
type awsProfile map[string]string

// iniSections reads an AWS shared config or credentials file the way the
// SDKs do: "[name]" sections, "key = value" (or "key: value") lines, keys
// case-insensitive, comments after "#" or ";" (inline ones after a space or
// tab), indented lines (nested values such as s3 settings) skipped. A
// file that cannot be opened (missing, unreadable) is no sections, not an
// error, as in the SDKs.
func iniSections(path string) (map[string]awsProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	out := map[string]awsProfile{}
	var cur awsProfile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';' {
			continue
		}
		if h, _, _ := strings.Cut(trimmed, "#"); strings.HasPrefix(h, "[") {
			h, _, _ = strings.Cut(h, ";")
			h = strings.TrimSpace(h)
			if !strings.HasSuffix(h, "]") {
				cur = nil
				continue
			}
			name := strings.Join(strings.Fields(h[1:len(h)-1]), " ")
			if cur = out[name]; cur == nil {
				cur = awsProfile{}
				out[name] = cur
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' || cur == nil {
			continue
		}
		for _, c := range []string{" #", " ;", "\t#", "\t;"} {
			line, _, _ = strings.Cut(line, c)
		}
		eq, colon := strings.Index(line, "="), strings.Index(line, ":")
		sep := eq
		if eq < 0 || colon >= 0 && colon < eq {
			sep = colon
		}
		if sep < 0 {
			continue
		}
		k, v := strings.ToLower(strings.TrimSpace(line[:sep])), strings.TrimSpace(line[sep+1:])
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		cur[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// awsSharedFiles are the shared config and credentials files: the
// environment's AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE, else
// ~/.aws/config and ~/.aws/credentials.
func (c *awsChain) sharedFiles() (config, credentials string) {
	config, credentials = c.getenv("AWS_CONFIG_FILE"), c.getenv("AWS_SHARED_CREDENTIALS_FILE")
	if config == "" || credentials == "" {
		home := c.home
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if config == "" {
			config = filepath.Join(home, ".aws", "config")
		}
		if credentials == "" {
			credentials = filepath.Join(home, ".aws", "credentials")
		}
	}
	return config, credentials
}

// profile returns the named profile, merged from both files as the SDKs
// merge it: in the config file a profile other than default is
// "[profile NAME]" (a bare "[NAME]" there is not a profile), in the
// credentials file it is "[NAME]", and the credentials file's keys win. A
// profile holding only one of the access key pair is an error.
func (c *awsChain) profile(name string) (awsProfile, bool, error) {
	configPath, credsPath := c.sharedFiles()
	merged := awsProfile{}
	found := false
	config, err := iniSections(configPath)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", configPath, err)
	}
	// "[profile default]" wins over "[default]", as in the SDKs.
	for _, section := range []string{name, "profile " + name} {
		if section == name && name != "default" {
			continue
		}
		if p, ok := config[section]; ok {
			if err := partialKeys(p, name, configPath); err != nil {
				return nil, false, err
			}
			found = true
			for k, v := range p {
				merged[k] = v
			}
		}
	}
	creds, err := iniSections(credsPath)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", credsPath, err)
	}
	if p, ok := creds[name]; ok {
		if err := partialKeys(p, name, credsPath); err != nil {
			return nil, false, err
		}
		found = true
		if p["aws_access_key_id"] != "" {
			delete(merged, "aws_session_token") // the pair and its token come together
		}
		for k, v := range p {
			merged[k] = v
		}
	}
	return merged, found, nil
}

func partialKeys(p awsProfile, name, path string) error {
	_, id := p["aws_access_key_id"]
	_, secret := p["aws_secret_access_key"]
	if id != secret {
		return fmt.Errorf("partial credentials for profile %q in %s: aws_access_key_id and aws_secret_access_key go together", name, path)
	}
	return nil
}

// fromProfile is the shared files' step of the chain. found is false when
// the profile does not exist (only an error when AWS_PROFILE names it) or
// names no credential source, and the chain goes on to the container and
// instance roles.
func (c *awsChain) fromProfile(region string) (src awsSource, found bool, err error) {
	name, explicit := c.getenv("AWS_PROFILE"), true
	if name == "" {
		name, explicit = c.getenv("AWS_DEFAULT_PROFILE"), false
	}
	if name == "" {
		name = "default"
	}
	p, ok, err := c.profile(name)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		if explicit {
			config, creds := c.sharedFiles()
			return nil, false, fmt.Errorf("AWS_PROFILE names profile %q, which is in neither %s nor %s", name, config, creds)
		}
		return nil, false, nil
	}
	unsupported := func(what string) error {
		return fmt.Errorf("AWS profile %q uses %s, which detour does not resolve: export the credentials instead "+
			`(eval "$(aws configure export-credentials --profile %s --format env)" sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN), `+
			"or use web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), container or instance credentials", name, what, name)
	}
	// The SDKs' order: a source profile, static keys, a named source, web
	// identity, SSO, a login session, a process. A role_arn anywhere but
	// beside a web identity token means assuming a role with other
	// credentials, which detour leaves to the AWS CLI.
	roleChain := unsupported("role chaining (role_arn with source_profile, credential_source or other credentials)")
	switch {
	case p["source_profile"] != "":
		return nil, false, roleChain
	case p["aws_access_key_id"] != "" && p["aws_secret_access_key"] != "":
		if p["role_arn"] != "" {
			return nil, false, roleChain
		}
		return staticSource{awsCreds{Credentials: credsOf(p["aws_access_key_id"], p["aws_secret_access_key"], p["aws_session_token"])}}, true, nil
	case p["credential_source"] != "":
		return nil, false, roleChain
	case p["web_identity_token_file"] != "":
		src, err := c.webIdentity(region, p["web_identity_token_file"], p["role_arn"], p["role_session_name"])
		return src, true, err
	case p["sso_session"] != "" || p["sso_start_url"] != "" || p["sso_account_id"] != "":
		return nil, false, unsupported("IAM Identity Center (SSO)")
	case p["login_session"] != "":
		return nil, false, unsupported("a console login session (aws login)")
	case p["role_arn"] != "":
		return nil, false, roleChain
	case p["credential_process"] != "":
		return &processSource{command: p["credential_process"]}, true, nil
	}
	return nil, false, nil
}
