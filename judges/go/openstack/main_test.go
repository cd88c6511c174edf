package judge

import (
	"os"
	"testing"

	"ccm-conformance.invalid/judges/judgekit"
)

// TestMain runs the tests, then asks the mock what the cloud APIs created and still
// exists: every test cleans up after itself, as the CCM must.
func TestMain(m *testing.M) {
	os.Exit(judgekit.Run(m, checkLeaks))
}

func checkLeaks() error {
	var r ready
	if err := judgekit.ReadReady(&r); err != nil {
		return err
	}
	client, err := newHTTPClient(r)
	if err != nil {
		return err
	}
	return judgekit.CheckLeaks(&client, r.AdminURL)
}
