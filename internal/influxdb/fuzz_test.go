package influxdb

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzInfluxConfig: the xk6-regime-influxdb output's settings from the JSON
// config, the environment and the --out argument. Any input is accepted or
// refused with an error naming the output; an accepted configuration has
// sane bounds, and no error message repeats a token or password given
// (givenSecrets).
func FuzzInfluxConfig(f *testing.F) {
	f.Add([]byte(`{"batchSize": 10, "flushInterval": 250, "timeout": "2s", "testid": "x", "database": "db"}`),
		"K6_REGIME_INFLUXDB_TOKEN", "s3cr3t-token", "http://user:pa55word@127.0.0.1:8086/db?retentionPolicy=w")
	f.Add([]byte(`{"url": "http://127.0.0.1:8086", "bucket": "b", "org": "o", "token": "tok-123456"}`),
		"K6_REGIME_INFLUXDB_BATCH_SIZE", "-1", "")
	f.Add([]byte(`null`), "K6_REGIME_INFLUXDB_URL", "ftp://x", "http://[::1]:badport/")
	f.Fuzz(func(t *testing.T, jsonConf []byte, envKey, envVal, arg string) {
		if !json.Valid(jsonConf) {
			jsonConf = nil // k6 hands the output valid JSON or nothing
		}
		env := map[string]string{envKey: envVal}
		cfg, err := parseConfig(jsonConf, env, arg, map[string]string{"testid": "t"}, time.Unix(0, 0))
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, Name) {
				t.Fatalf("error does not name the output: %v", err)
			}
			for _, secret := range givenSecrets(jsonConf, envKey, envVal, arg) {
				if len(secret) >= 4 && strings.Contains(msg, secret) && echoesSecret(jsonConf, envKey, envVal, arg, secret) {
					t.Fatalf("error repeats the secret %q: %v", secret, err)
				}
			}
			return
		}
		if cfg.BatchSize < 1 || cfg.BufferLimit < 1 || cfg.FlushInterval <= 0 || cfg.Timeout <= 0 || cfg.MaxRetries < 0 {
			t.Fatalf("accepted out-of-range settings: %+v", cfg)
		}
		if strings.Contains(cfg.URL, "@") {
			t.Fatalf("URL keeps credentials: %q", cfg.URL)
		}
	})
}

// echoesSecret tells a secret the error message repeats from one that
// happens to spell a word of the message's own text (a password "port " and
// "invalid port (value not shown)"): the same input with the secret replaced
// by a marker everywhere it occurs is parsed again, and the secret was
// repeated when the marker shows up in that error.
func echoesSecret(jsonConf []byte, envKey, envVal, arg, secret string) bool {
	const marker = "QzXmarkerXzQ"
	swap := func(s string) string { return strings.ReplaceAll(s, secret, marker) }
	var doc any
	if jsonConf != nil && json.Unmarshal(jsonConf, &doc) == nil {
		jsonConf, _ = json.Marshal(swapStrings(doc, swap))
	}
	_, err := parseConfig(jsonConf, map[string]string{envKey: swap(envVal)}, swap(arg),
		map[string]string{"testid": "t"}, time.Unix(0, 0))
	return err != nil && strings.Contains(err.Error(), marker)
}

// swapStrings applies f to every string in a decoded JSON document.
func swapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for i := range x {
			x[i] = swapStrings(x[i], f)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = swapStrings(e, f)
		}
	}
	return v
}

// givenSecrets are the values the input gives as a token or password: the
// environment's TOKEN and PASSWORD, the JSON config's token and password,
// the password of the --out URL (when it parses) and of its query.
func givenSecrets(jsonConf []byte, envKey, envVal, arg string) []string {
	var out []string
	if envKey == envPrefix+"TOKEN" || envKey == envPrefix+"PASSWORD" {
		out = append(out, envVal)
	}
	var m map[string]any
	if json.Unmarshal(jsonConf, &m) == nil {
		for _, k := range []string{"token", "password"} {
			if v, ok := m[k].(string); ok {
				out = append(out, v)
			}
		}
	}
	u, err := url.Parse(arg)
	if err == nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
		out = append(out, u.Query()["token"]...)
		out = append(out, u.Query()["password"]...)
		return out
	}
	// a URL that does not parse: what follows a colon in its authority may
	// be a password mistaken for a port (http://:secret)
	if i := strings.Index(arg, "//"); i >= 0 {
		auth := arg[i+2:]
		if j := strings.IndexAny(auth, "/?#"); j >= 0 {
			auth = auth[:j]
		}
		if k := strings.LastIndex(auth, "@"); k >= 0 {
			auth = auth[:k]
		}
		if c := strings.Index(auth, ":"); c >= 0 {
			out = append(out, auth[c+1:])
		}
	}
	return out
}
