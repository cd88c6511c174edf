package judge

import (
	"os"
	"testing"

	"ccm-conformance.invalid/judges/judgekit"
)

// TestMain runs the tests, then asks the mock what the ARM API created and still exists:
// every test deletes what it made, as the CCM must.
func TestMain(m *testing.M) {
	os.Exit(judgekit.Run(m, checkLeaks))
}

func checkLeaks() error {
	r, err := readReady()
	if err != nil {
		return err
	}
	client, err := newHTTPClient(r)
	if err != nil {
		return err
	}
	return judgekit.CheckLeaks(client, r.AdminURL)
}
