package policy

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// withState inserts a state section into goodPolicy, and limits into its
// backup upstream when limits is not "".
func withState(section, limits string) string {
	p := goodPolicy
	if section != "" {
		p = strings.Replace(p, `"version": "t1",`, `"version": "t1", "state": `+section+`,`, 1)
	}
	if limits != "" {
		p = strings.Replace(p, `"auth": {"env": "BACKUP_KEY"},`, `"auth": {"env": "BACKUP_KEY"}, "limits": `+limits+`,`, 1)
	}
	return p
}

// TestStateSection: memory stays the default; a redis backend compiles its
// URL, prefix, timeout and password file; every bad value is refused at
// its field's line with a message that says what to write instead.
func TestStateSection(t *testing.T) {
	t.Parallel()
	files := map[string]string{"/etc/detour/redis-pw": " hunter2\n", "/etc/detour/empty": "\n"}
	opts := testOptions()
	opts.ReadFile = func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	for _, tc := range []struct {
		name, section, limits string
		want                  StatePolicy
		err                   string // a substring of the error; "" for none
	}{
		{name: "absent", want: StatePolicy{Backend: StateMemory}},
		{name: "memory", section: `{"backend": "memory"}`, want: StatePolicy{Backend: StateMemory}},
		{name: "redis defaults", section: `{"backend": "redis", "redis": {"url": "redis://10.0.0.5:6379"}}`,
			want: StatePolicy{Backend: StateRedis, Redis: RedisPolicy{URL: "redis://10.0.0.5:6379", KeyPrefix: DefaultRedisKeyPrefix, Timeout: DefaultRedisTimeout}}},
		{name: "redis full", section: `{"backend": "redis", "redis": {"url": "rediss://cache.internal/2", "password_file": "redis-pw", "key_prefix": "prod:", "timeout": "20ms"}}`,
			limits: `{"fleet_concurrency": 40}`,
			want:   StatePolicy{Backend: StateRedis, Redis: RedisPolicy{URL: "rediss://cache.internal/2", Password: "hunter2", KeyPrefix: "prod:", Timeout: 20 * time.Millisecond}}},
		{name: "unknown backend", section: `{"backend": "etcd"}`, err: `policy.json:2:`},
		{name: "unknown backend message", section: `{"backend": "etcd"}`, err: `state.backend: must be "memory" or "redis"; got "etcd"`},
		{name: "redis without section", section: `{"backend": "redis"}`, err: `state.backend: "redis" needs a state.redis section`},
		{name: "section without redis", section: `{"redis": {"url": "redis://h:1"}}`, err: `state.redis: needs "backend": "redis"`},
		{name: "no url", section: `{"backend": "redis", "redis": {}}`, err: `state.redis.url: is required`},
		{name: "http url", section: `{"backend": "redis", "redis": {"url": "http://h:6379"}}`, err: `state.redis.url: must start with redis:// or rediss://`},
		{name: "no host", section: `{"backend": "redis", "redis": {"url": "redis://:6379"}}`, err: `state.redis.url: names no host`},
		{name: "bad port", section: `{"backend": "redis", "redis": {"url": "redis://h:99999"}}`, err: `state.redis.url: has an invalid port`},
		{name: "password in url", section: `{"backend": "redis", "redis": {"url": "redis://u:pw@h:6379"}}`, err: `put it in state.redis.password_file`},
		{name: "bad db", section: `{"backend": "redis", "redis": {"url": "redis://h:6379/x"}}`, err: `state.redis.url: path must be a database number`},
		{name: "query", section: `{"backend": "redis", "redis": {"url": "redis://h:6379?dial_timeout=1s"}}`, err: `state.redis.url: must have no query`},
		{name: "bad timeout", section: `{"backend": "redis", "redis": {"url": "redis://h", "timeout": "soon"}}`, err: `state.redis.timeout:`},
		{name: "negative timeout", section: `{"backend": "redis", "redis": {"url": "redis://h", "timeout": "-1s"}}`, err: `state.redis.timeout: duration "-1s" must not be negative`},
		{name: "long timeout", section: `{"backend": "redis", "redis": {"url": "redis://h", "timeout": "10s"}}`, err: `state.redis.timeout: must be at most 5s`},
		{name: "missing password file", section: `{"backend": "redis", "redis": {"url": "redis://h", "password_file": "nope"}}`, err: `state.redis.password_file: cannot read the Redis password`},
		{name: "empty password file", section: `{"backend": "redis", "redis": {"url": "redis://h", "password_file": "empty"}}`, err: `state.redis.password_file: /etc/detour/empty is empty`},
		{name: "empty prefix", section: `{"backend": "redis", "redis": {"url": "redis://h", "key_prefix": ""}}`, err: `state.redis.key_prefix: must not be empty`},
		{name: "glob prefix", section: `{"backend": "redis", "redis": {"url": "redis://h", "key_prefix": "a*"}}`, err: `state.redis.key_prefix: must not contain`},
		{name: "fleet concurrency needs redis", limits: `{"fleet_concurrency": 4}`, err: `upstreams.backup.limits.fleet_concurrency: needs state.backend "redis"`},
		{name: "negative fleet concurrency", section: `{"backend": "redis", "redis": {"url": "redis://h"}}`, limits: `{"fleet_concurrency": -1}`, err: `upstreams.backup.limits.fleet_concurrency: must not be negative`},
	} {
		c, err := Compile("/etc/detour/policy.json", []byte(withState(tc.section, tc.limits)), opts)
		if tc.err != "" {
			var es Errors
			if !errors.As(err, &es) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v; want one containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.State != tc.want {
			t.Errorf("%s: state %+v; want %+v", tc.name, c.State, tc.want)
		}
		if tc.limits != "" && c.Upstreams["backup"].Limits.FleetConcurrency != 40 {
			t.Errorf("%s: fleet_concurrency %d; want 40", tc.name, c.Upstreams["backup"].Limits.FleetConcurrency)
		}
	}
}
