package influxdb

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var influxTestNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestInfluxConfigPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		json    string
		env     map[string]string
		arg     string
		tags    map[string]string
		check   func(t *testing.T, c config)
		wantErr []string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c config) {
				require.Equal(t, "http://127.0.0.1:8086", c.URL)
				require.True(t, c.V1)
				require.Equal(t, "k6", c.Bucket)
				require.Empty(t, c.Token)
				require.Equal(t, time.Second, c.FlushInterval)
				require.Equal(t, 1000, c.BatchSize)
				require.Equal(t, 10000, c.BufferLimit)
				require.Equal(t, 5*time.Second, c.Timeout)
				require.Equal(t, 3, c.MaxRetries)
				require.Equal(t, 10*time.Second, c.StopTimeout)
				require.Equal(t, "k6-20260301T120000Z", c.TestID)
				require.True(t, c.TestIDAuto)
			},
		},
		{
			// found by FuzzInfluxConfig: the JSON config's URL is checked
			// as the environment's is
			name:    "JSON URL checked",
			json:    `{"url": "@", "database": "db"}`,
			wantErr: []string{`JSON config key "url": URL scheme must be http or https, got ""`, `JSON config key "url": URL has no host`},
		},
		{
			name:    "JSON URL not a string",
			json:    `{"url": 8086}`,
			wantErr: []string{`JSON config key "url": must be a URL string`},
		},
		{
			name: "JSON URL with credentials",
			json: `{"url": "http://bob:pw@127.0.0.1:8086"}`,
			check: func(t *testing.T, c config) {
				require.Equal(t, "http://127.0.0.1:8086", c.URL)
				require.Equal(t, "bob:pw", c.Token, "user info becomes the 1.8 token")
			},
		},
		{
			name: "json < env < argument",
			json: `{"batchSize": 10, "flushInterval": 250, "timeout": "2s", "testid": "from-json", "database": "jsondb"}`,
			env:  map[string]string{"K6_REGIME_INFLUXDB_BATCH_SIZE": "20", "K6_REGIME_INFLUXDB_TESTID": "from-env", "PATH": "/bin"},
			arg:  "http://influx.local:9999/argdb?retentionPolicy=week&testid=from-arg",
			check: func(t *testing.T, c config) {
				require.Equal(t, 20, c.BatchSize)
				require.Equal(t, 250*time.Millisecond, c.FlushInterval, "a bare JSON number is milliseconds")
				require.Equal(t, 2*time.Second, c.Timeout)
				require.Equal(t, "from-arg", c.TestID)
				require.Equal(t, "http://influx.local:9999", c.URL)
				require.Equal(t, "argdb/week", c.Bucket)
			},
		},
		{
			name: "v1 credentials from the URL",
			arg:  "https://alice:pa55@127.0.0.1:8086/k6",
			check: func(t *testing.T, c config) {
				require.Equal(t, "https://127.0.0.1:8086", c.URL)
				require.Equal(t, "alice:pa55", c.Token)
				require.Equal(t, "k6", c.Bucket)
			},
		},
		{
			name: "v2 from the environment",
			env: map[string]string{
				"K6_REGIME_INFLUXDB_URL": "http://127.0.0.1:8086", "K6_REGIME_INFLUXDB_ORG": "acme",
				"K6_REGIME_INFLUXDB_BUCKET": "perf", "K6_REGIME_INFLUXDB_TOKEN": "tok",
			},
			check: func(t *testing.T, c config) {
				require.False(t, c.V1)
				require.Equal(t, "acme", c.Org)
				require.Equal(t, "perf", c.Bucket)
				require.Equal(t, "tok", c.Token)
			},
		},
		{
			name: "testid from --tag",
			tags: map[string]string{"testid": "run42"},
			check: func(t *testing.T, c config) {
				require.Equal(t, "run42", c.TestID)
				require.False(t, c.TestIDAuto)
			},
		},
		{
			name:    "every bad value at once",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BATCH_SIZE": "lots", "K6_REGIME_INFLUXDB_TIMEOUT": "soon"},
			arg:     "http://127.0.0.1:8086/k6?maxRetries=-1&flushInterval=0s",
			wantErr: []string{"batchSize=\"lots\" (from K6_REGIME_INFLUXDB_BATCH_SIZE): must be an integer from 1 to 100000", "timeout=\"soon\"", "maxRetries=\"-1\"", "flushInterval=\"0s\""},
		},
		{
			name:    "an unknown setting beside a bad value: both said",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BATCHSIZE": "10", "K6_REGIME_INFLUXDB_BATCH_SIZE": "abc"},
			wantErr: []string{"unknown environment variable K6_REGIME_INFLUXDB_BATCHSIZE", `batchSize="abc" (from K6_REGIME_INFLUXDB_BATCH_SIZE)`},
		},
		{
			// the relation's other side says it came from the default: the
			// misspelt setting meant for it did not apply
			name:    "a misspelt setting a relation error depends on",
			arg:     "http://127.0.0.1:8086/k6?maxretryinterval=20s&retryInterval=15s",
			wantErr: []string{`query parameter "maxretryinterval": unknown setting`, `retryInterval="15s" (from --out argument query parameter "retryInterval"): must not exceed maxRetryInterval (10s, from default)`},
		},
		{
			name:    "port out of range",
			arg:     "http://127.0.0.1:99999/k6",
			wantErr: []string{"URL port 99999 is not a port (1 to 65535)"},
		},
		{
			name:    "no host, a port only",
			arg:     "http://:18086/k6",
			wantErr: []string{"URL has no host"},
		},
		{
			name:    "database in the path and the query",
			arg:     "http://127.0.0.1:8086/k6?database=other",
			wantErr: []string{`database "other" and the URL path's database "k6": name it once`},
		},
		{
			name:    "unknown environment variable",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BATCHSIZE": "10"},
			wantErr: []string{"unknown environment variable K6_REGIME_INFLUXDB_BATCHSIZE", "K6_REGIME_INFLUXDB_BATCH_SIZE"},
		},
		{
			name:    "unknown query parameter and JSON key",
			json:    `{"bacthSize": 1}`,
			arg:     "http://127.0.0.1:8086/k6?db=k6",
			wantErr: []string{`query parameter "db": unknown setting`, `JSON config key "bacthSize": unknown setting`},
		},
		{
			name:    "bad scheme",
			arg:     "udp://127.0.0.1:8089",
			wantErr: []string{`URL scheme must be http or https, got "udp"`},
		},
		{
			name:    "bucket needs org, and no database",
			env:     map[string]string{"K6_REGIME_INFLUXDB_BUCKET": "perf", "K6_REGIME_INFLUXDB_DATABASE": "k6"},
			wantErr: []string{"org is required", "set either bucket and org (InfluxDB 2.x) or database (InfluxDB 1.8)"},
		},
		{
			name:    "token and username",
			arg:     "http://bob:pw@127.0.0.1:8086/k6?token=abc",
			wantErr: []string{"token=[redacted]", "set either token or username/password"},
		},
		{
			name:    "batch larger than buffer",
			arg:     "http://127.0.0.1:8086/k6?batchSize=100&bufferLimit=10",
			wantErr: []string{"batchSize=\"100\"", "must not exceed bufferLimit (10, from --out argument query parameter \"bufferLimit\")"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw json.RawMessage
			if tc.json != "" {
				raw = json.RawMessage(tc.json)
			}
			c, err := parseConfig(raw, tc.env, tc.arg, tc.tags, influxTestNow)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				require.Contains(t, err.Error(), "xk6-regime-influxdb: invalid configuration")
				for _, w := range tc.wantErr {
					require.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// TestInfluxConfigErrorsRedactSecrets: no configuration error quotes a
// token or password, even when the URL holding it does not parse.
func TestInfluxConfigErrorsRedactSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-T0KEN"
	cases := map[string]struct {
		env map[string]string
		arg string
	}{
		"unparsable URL with password": {arg: "http://bob:" + secret + "@127.0.0.1:port/k6"},
		"control character in URL":     {arg: "http://bob:" + secret + "@127.0.0.1:8086/k6\x7f"},
		"token in query, other error":  {arg: "http://127.0.0.1:8086/k6?token=" + secret + "&batchSize=x&username=u"},
		"token env with bad URL env": {env: map[string]string{
			"K6_REGIME_INFLUXDB_TOKEN": secret, "K6_REGIME_INFLUXDB_URL": "http://u:" + secret + "@h:x",
		}},
		"password without user": {env: map[string]string{"K6_REGIME_INFLUXDB_PASSWORD": secret}},
		// found by FuzzInfluxConfig: url.Parse quotes what it takes for a port
		"password where the port goes": {arg: "http://:" + secret},
		"password where the host goes": {arg: "http://bob:" + secret + "%zz@127.0.0.1/k6"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig(nil, tc.env, tc.arg, nil, influxTestNow)
			require.Error(t, err)
			require.NotContains(t, err.Error(), secret)
		})
	}
}
