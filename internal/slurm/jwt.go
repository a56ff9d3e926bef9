package slurm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"time"
)

// Token signs an HS256 JWT for user, valid for lifetime, the way `scontrol token` does:
// header {"alg":"HS256","typ":"JWT"}, claims iat, exp and sun (the Slurm user name).
func Token(key []byte, user string, now time.Time, lifetime time.Duration) (string, error) {
	enc := base64.RawURLEncoding
	header, err := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iat": now.Unix(),
		"exp": now.Add(lifetime).Unix(),
		"sun": user,
	})
	if err != nil {
		return "", err
	}
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil)), nil
}
