package judge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
)

// TestMain runs the tests, then asks the mock what the ARM API created and still exists:
// every test deletes what it made, as the CCM must.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && os.Getenv("CCM_JUDGE_READY") != "" {
		if err := checkLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
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
	resp, err := client.Get(r.AdminURL + "/leaks")
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
