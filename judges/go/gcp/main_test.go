package judge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
)

// TestMain makes the process look like a program on a GCE node whose metadata server is
// the mock, and nothing else: no credentials file, no gcloud config (a fresh HOME and
// CLOUDSDK_CONFIG), GCE_METADATA_HOST from the ready file. It runs the tests, then asks
// the mock what the Compute API created and still exists: every test deletes what it
// made, as the CCM must.
func TestMain(m *testing.M) {
	home := ""
	if os.Getenv("CCM_JUDGE_READY") != "" {
		r, err := readReady()
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			os.Exit(1)
		}
		home, err = os.MkdirTemp("", "gcp-judge-home")
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			os.Exit(1)
		}
		os.Unsetenv("GOOGLE_APPLICATION_CREDENTIALS")
		os.Unsetenv("GOOGLE_CLOUD_UNIVERSE_DOMAIN")
		os.Setenv("HOME", home)
		os.Setenv("CLOUDSDK_CONFIG", home)
		os.Setenv("GCE_METADATA_HOST", r.MetadataHost)
		os.Setenv("GCE_METADATA_IP", r.MetadataHost)
	}
	code := m.Run()
	if code == 0 && os.Getenv("CCM_JUDGE_READY") != "" {
		if err := checkLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL leak check:", err)
			code = 1
		}
	}
	if home != "" {
		os.RemoveAll(home)
	}
	os.Exit(code)
}

func checkLeaks() error {
	r, err := readReady()
	if err != nil {
		return err
	}
	resp, err := http.Get(r.AdminURL + "/leaks")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/leaks: %s", r.AdminURL, resp.Status)
	}
	var leaks struct {
		Total  int            `json:"total"`
		ByType map[string]any `json:"by_type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&leaks); err != nil {
		return err
	}
	if leaks.Total != 0 {
		return fmt.Errorf("%d resources left behind: %v", leaks.Total, leaks.ByType)
	}
	return nil
}
