package inject

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The Redis password of the fleet state (policy state.redis.password_file):
// a Secret the operator already has (the Redis chart's or operator's), one
// key of it mounted as a file into detour's container only, on the
// directory so that a rotated password reaches detour.
const (
	// RedisPasswordDir holds the password file.
	RedisPasswordDir = "/var/run/secrets/detour-redis"
	// RedisPasswordFile is the password as detour sees it: the policy's
	// state.redis.password_file.
	RedisPasswordFile = RedisPasswordDir + "/password"
	// DefaultRedisPasswordKey is the password's key in the Secret when the
	// config names none.
	DefaultRedisPasswordKey = "password"

	volRedis = "detour-redis"
)

func (c Config) validateRedis() []error {
	var errs []error
	if c.RedisPasswordSecret == "" {
		if c.RedisPasswordKey != "" {
			errs = append(errs, fmt.Errorf("redisPasswordKey %q without redisPasswordSecret", c.RedisPasswordKey))
		}
		return errs
	}
	if msgs := validation.IsDNS1123Subdomain(c.RedisPasswordSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("redisPasswordSecret %q: %s", c.RedisPasswordSecret, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsConfigMapKey(c.redisPasswordKey()); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("redisPasswordKey %q: %s", c.RedisPasswordKey, strings.Join(msgs, "; ")))
	}
	return errs
}

func (c Config) redisPasswordKey() string {
	if c.RedisPasswordKey == "" {
		return DefaultRedisPasswordKey
	}
	return c.RedisPasswordKey
}

// redisMounts is the password's mount in detour's container, if any.
func (s settings) redisMounts() []corev1.VolumeMount {
	if s.RedisPasswordSecret == "" {
		return nil
	}
	return []corev1.VolumeMount{{Name: volRedis, MountPath: RedisPasswordDir, ReadOnly: true}}
}

// redisVolumes is the password's volume, if any: the one key, as the file
// "password" whatever the key is called.
func (s settings) redisVolumes() []corev1.Volume {
	if s.RedisPasswordSecret == "" {
		return nil
	}
	mode := int32(secretMode)
	return []corev1.Volume{{Name: volRedis, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  s.RedisPasswordSecret,
		Items:       []corev1.KeyToPath{{Key: s.redisPasswordKey(), Path: "password"}},
		DefaultMode: &mode,
	}}}}
}
