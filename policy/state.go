package policy

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults and bounds of the state section.
const (
	// StateMemory and StateRedis are the values of state.backend.
	StateMemory = "memory"
	StateRedis  = "redis"
	// DefaultRedisKeyPrefix starts every key detour writes in Redis.
	DefaultRedisKeyPrefix = "detour:"
	// DefaultRedisTimeout bounds each Redis command. Redis is consulted on
	// a request's path only for fleet-wide limits and half-open probes, so
	// this is at most what such a request can wait before going on with
	// local state; a LAN round trip is well under a millisecond.
	DefaultRedisTimeout = 50 * time.Millisecond
	// MaxRedisTimeout bounds state.redis.timeout: a longer wait would put
	// a slow Redis on the request path, which the backend exists to avoid.
	MaxRedisTimeout = 5 * time.Second
)

// StatePolicy is the compiled state section.
type StatePolicy struct {
	// Backend is StateMemory or StateRedis.
	Backend string
	// Redis is filled for StateRedis only.
	Redis RedisPolicy
}

// RedisPolicy is the compiled state.redis section.
type RedisPolicy struct {
	// URL is state.redis.url as written (it carries no password).
	URL string
	// Password is password_file's content; "" without one.
	Password Secret
	// KeyPrefix is never empty.
	KeyPrefix string
	// Timeout is above zero and at most MaxRedisTimeout.
	Timeout time.Duration
}

// state compiles the state section. The password file is read here, at
// every load, so that a policy naming a missing or empty file is refused
// with the field's position rather than failing later to authenticate.
func (k *compiler) state(sf *StateFile) {
	k.c.State = StatePolicy{Backend: StateMemory}
	if sf == nil {
		return
	}
	switch sf.Backend {
	case "", StateMemory:
		if sf.Redis != nil {
			k.errorf("state.redis", `needs "backend": "redis" (the backend is %q)`, StateMemory)
		}
		return
	case StateRedis:
	default:
		k.errorf("state.backend", "must be %q or %q; got %q", StateMemory, StateRedis, sf.Backend)
		return
	}
	rf := sf.Redis
	if rf == nil {
		k.errorf("state.backend", `"redis" needs a state.redis section with at least "url"`)
		return
	}
	rp := RedisPolicy{URL: rf.URL, KeyPrefix: rf.KeyPrefix, Timeout: DefaultRedisTimeout}
	if err := checkRedisURL(rf.URL); err != nil {
		k.errorf("state.redis.url", "%v", err)
	}
	if rp.KeyPrefix == "" {
		if k.present("state.redis.key_prefix") {
			k.errorf("state.redis.key_prefix", "must not be empty (absent: %q)", DefaultRedisKeyPrefix)
		}
		rp.KeyPrefix = DefaultRedisKeyPrefix
	} else if strings.ContainsAny(rp.KeyPrefix, " \t\r\n*?[]{}") {
		// Braces would make a Redis Cluster hash tag; glob characters
		// would match other fleets' keys when detour resynchronises.
		k.errorf("state.redis.key_prefix", "must not contain spaces or any of * ? [ ] { }; got %q", rp.KeyPrefix)
	}
	switch d, err := rf.Timeout.Parse(); {
	case err != nil:
		k.errorf("state.redis.timeout", "%v", err)
	case d < 0:
		k.errorf("state.redis.timeout", "must be above zero (absent: %s); got %s", DefaultRedisTimeout, d)
	case d > MaxRedisTimeout:
		k.errorf("state.redis.timeout", "must be at most %s: Redis must never hold a request up for long; got %s", MaxRedisTimeout, d)
	case d > 0:
		rp.Timeout = d
	}
	if rf.PasswordFile != "" {
		path := k.resolve(rf.PasswordFile)
		b, err := k.readRef(path)
		pw := strings.TrimSpace(string(b))
		switch {
		case err != nil:
			k.errorf("state.redis.password_file", "cannot read the Redis password: %v", err)
		case pw == "":
			k.errorf("state.redis.password_file", "%s is empty; write the password into it or leave password_file out", path)
		}
		rp.Password = Secret(pw)
	} else if k.present("state.redis.password_file") {
		k.errorf("state.redis.password_file", "must name a file holding the password, or be left out")
	}
	// Set even when a field was refused (the policy is refused anyway), so
	// that limits.fleet_concurrency is not refused a second time for it.
	k.c.State = StatePolicy{Backend: StateRedis, Redis: rp}
}

// checkRedisURL accepts redis:// and rediss:// URLs with a host and port
// (port optional, 6379), an optional user and numeric database, and no
// password: a password in a policy file would be in every copy of it, in
// /policy/history's hashes, and in the repository it is kept in.
func checkRedisURL(raw string) error {
	if raw == "" {
		return fmt.Errorf(`is required, e.g. "redis://127.0.0.1:6379"`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("is not a URL: %v", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf(`must start with redis:// or rediss:// (TLS); got %q`, raw)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("names no host: %q", raw)
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("has an invalid port %q", p)
		}
	}
	if _, set := u.User.Password(); set {
		return fmt.Errorf("must not carry a password (it would be in every copy of the policy); put it in state.redis.password_file")
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		var n int
		if _, err := fmt.Sscanf(db, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != db {
			return fmt.Errorf("path must be a database number, e.g. redis://host:6379/0; got %q", u.Path)
		}
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("must have no query or fragment; got %q", raw)
	}
	return nil
}

// fleetConcurrency compiles an upstream's limits.fleet_concurrency, which
// means something only when the fleet shares a Redis.
func (k *compiler) fleetConcurrency(p string, v int) int {
	switch {
	case v == 0:
		return 0
	case v < 0:
		k.errorf(p+".fleet_concurrency", "must not be negative (0 or absent: no fleet limit); got %d", v)
		return 0
	case k.c.State.Backend != StateRedis:
		k.errorf(p+".fleet_concurrency", `needs state.backend "redis": without a shared store there is no fleet to count over (limits.concurrency is per process)`)
		return 0
	}
	return v
}
