package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRedisPasswordMountedIntoDetourOnly: with redisPasswordSecret the
// Secret's key is mounted as RedisPasswordFile into detour's container and
// no other; without it nothing is.
func TestRedisPasswordMountedIntoDetourOnly(t *testing.T) {
	t.Parallel()
	inject := func(cfg Config) corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "shop"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
		out, _ := mutated(t, cfg, pod)
		return *out
	}
	for _, tc := range []struct {
		name, secret, key, wantKey string
	}{
		{"default key", "shop-redis", "", DefaultRedisPasswordKey},
		{"the Bitnami chart's key", "redis", "redis-password", "redis-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pod := inject(Config{RedisPasswordSecret: tc.secret, RedisPasswordKey: tc.key})
			var vol *corev1.Volume
			for i := range pod.Spec.Volumes {
				if pod.Spec.Volumes[i].Name == volRedis {
					vol = &pod.Spec.Volumes[i]
				}
			}
			if vol == nil || vol.Secret == nil || vol.Secret.SecretName != tc.secret || len(vol.Secret.Items) != 1 ||
				vol.Secret.Items[0].Key != tc.wantKey || vol.Secret.Items[0].Path != "password" ||
				RedisPasswordDir+"/"+vol.Secret.Items[0].Path != RedisPasswordFile {
				t.Fatalf("volume %+v; want Secret %s key %s as the file password", vol, tc.secret, tc.wantKey)
			}
			for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				mounted := false
				for _, m := range c.VolumeMounts {
					if m.Name == volRedis {
						mounted = m.MountPath == RedisPasswordDir && m.ReadOnly
					}
				}
				if mounted != (c.Name == ContainerName) {
					t.Errorf("container %s: password mounted %v; want only in %s, read-only at %s", c.Name, mounted, ContainerName, RedisPasswordDir)
				}
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		for _, v := range inject(Config{}).Spec.Volumes {
			if v.Name == volRedis {
				t.Errorf("a Redis password volume without redisPasswordSecret")
			}
		}
	})
}

func TestRedisConfigRefusesMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"redisPasswordKey":"pw"}`, `redisPasswordKey "pw" without redisPasswordSecret`},
		{`{"redisPasswordSecret":"Bad_Name"}`, `redisPasswordSecret "Bad_Name"`},
		{`{"redisPasswordSecret":"redis","redisPasswordKey":"a/b"}`, `redisPasswordKey "a/b"`},
	} {
		_, err := ParseConfig("c.json", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want %q", tc.in, err, tc.want)
		}
	}
}
