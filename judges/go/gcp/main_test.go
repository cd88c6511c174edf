package judge

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"ccm-conformance.invalid/judges/judgekit"
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
	code := judgekit.Run(m, checkLeaks)
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
	return judgekit.CheckLeaks(http.DefaultClient, r.AdminURL)
}
