package slurm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// TokenClaims are what the operator reads back from a token it signed: whom it names and
// when it expires.
type TokenClaims struct {
	User    string
	Expires time.Time
}

// VerifyToken checks that tok is an HS256 JWT signed with key and returns its claims. It does
// not check the expiry: the caller decides how much time left is enough.
func VerifyToken(key []byte, tok string) (TokenClaims, error) {
	enc := base64.RawURLEncoding
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return TokenClaims{}, errors.New("not a JWT")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := enc.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return TokenClaims{}, errors.New("the token is not signed with this key")
	}
	raw, err := enc.DecodeString(parts[1])
	if err != nil {
		return TokenClaims{}, fmt.Errorf("the token's claims: %w", err)
	}
	var c struct {
		Exp int64  `json:"exp"`
		Sun string `json:"sun"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return TokenClaims{}, fmt.Errorf("the token's claims: %w", err)
	}
	return TokenClaims{User: c.Sun, Expires: time.Unix(c.Exp, 0)}, nil
}
