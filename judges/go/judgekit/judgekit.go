// Package judgekit is what the Go judges of the mock clouds share (judges/go/<cloud>, each
// its own module requiring this one through a `replace` to ../judgekit): reading the
// mock's ready file, TestMain's leak check, an HTTP client trusting the mock's CA, the
// mock's admin API, test contexts and polling. What is a cloud's own (its ready object,
// its SDK clients, its leak report's admin URL and transport) stays in its judge.
//
// Standard library only, so the judges' go.sum files carry nothing for it.
package judgekit

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// ReadyEnv names the environment variable holding the path of the mock's ready file
// (`ccm-conformance mock <cloud> --ready-file F`); tests/go_judges.rs sets it.
const ReadyEnv = "CCM_JUDGE_READY"

// Enabled says whether a mock is there to judge (ReadyEnv is set).
func Enabled() bool { return os.Getenv(ReadyEnv) != "" }

// ReadReady decodes the mock's ready file into r (a pointer to the judge's ready struct)
// and checks that each of the required top-level JSON fields is set (not missing, null
// or "").
func ReadReady(r any, required ...string) error {
	path := os.Getenv(ReadyEnv)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the ready file: %w", err)
	}
	if err := json.Unmarshal(data, r); err != nil {
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	for _, name := range required {
		if v, ok := fields[name]; !ok || v == nil || v == "" {
			return fmt.Errorf("ready file %s lacks %s: %s", path, strings.Join(required, "/"), data)
		}
	}
	return nil
}

// LoadReady is ReadReady in a test: it skips the test when no mock is there and fails it
// when the ready file is wrong.
func LoadReady(t testing.TB, r any, required ...string) {
	t.Helper()
	if !Enabled() {
		t.Skip(ReadyEnv + " is not set (tests/go_judges.rs starts the mock and sets it)")
	}
	if err := ReadReady(r, required...); err != nil {
		t.Fatal(err)
	}
}

// Run is TestMain's body: it runs the tests, then, when they passed against a mock, asks
// leaks (nil: no check) what the cloud APIs created and still exists, since every test
// cleans up after itself, as a CCM must. It returns the exit code for os.Exit.
func Run(m *testing.M, leaks func() error) int {
	code := m.Run()
	if code == 0 && Enabled() && leaks != nil {
		if err := leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL leak check:", err)
			code = 1
		}
	}
	return code
}

// CheckLeaks asks the mock's admin API (`GET <adminURL>/leaks`) what the cloud APIs
// created that still exists, in either report the mocks give: `{"total": N, "by_type":
// {...}}` (OpenStack, Azure, GCP) or `{"leaks": ["<kind> <id>", ...]}` (AWS, vSphere).
// It returns nil when nothing is left.
func CheckLeaks(client *http.Client, adminURL string) error {
	resp, err := client.Get(adminURL + "/leaks")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/leaks: %s", adminURL, resp.Status)
	}
	var leaks struct {
		Total  int            `json:"total"`
		ByType map[string]any `json:"by_type"`
		Leaks  []string       `json:"leaks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&leaks); err != nil {
		return fmt.Errorf("GET %s/leaks: %w", adminURL, err)
	}
	if leaks.Total != 0 {
		return fmt.Errorf("%d resources left behind: %v", leaks.Total, leaks.ByType)
	}
	if len(leaks.Leaks) != 0 {
		return fmt.Errorf("left behind: %v", leaks.Leaks)
	}
	return nil
}

// HTTPClient is a client with a 30 s timeout that trusts only the CA in caFile (a PEM
// file, as the ready files' `ca_file` names) when caFile is set, the system's otherwise:
// a judge that ignored the mock's CA could not connect.
func HTTPClient(caFile string) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}, nil
}

// Admin sends one request to the mock's admin API (`adminURL + path`, a JSON body when
// body is not nil) and decodes a JSON answer into out when out is not nil; an answer of
// 300 or more is an error with its body.
func Admin(client *http.Client, adminURL, method, path string, body, out any) error {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, adminURL+path, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("admin %s %s: %s %s", method, path, resp.Status, text)
	}
	if out != nil {
		if err := json.Unmarshal(text, out); err != nil {
			return fmt.Errorf("admin %s %s: %w in %s", method, path, err, text)
		}
	}
	return nil
}

// Context is a context for one test's calls, cancelled when the test ends or after a
// minute.
func Context(t testing.TB) context.Context {
	return ContextWithin(t, time.Minute)
}

// ContextWithin is Context with another deadline.
func ContextWithin(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls check every 20 ms until it reports done, failing the test when check
// fails or at the deadline (with the last state check reported).
func WaitFor(t testing.TB, what string, timeout time.Duration, check func() (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state, err := check()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still %q after %s", what, state, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
