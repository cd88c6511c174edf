package judgekit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type ready struct {
	Endpoint string  `json:"endpoint"`
	CAFile   *string `json:"ca_file"`
	AdminURL string  `json:"admin_url"`
}

func writeReady(t *testing.T, text string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ready.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ReadyEnv, path)
}

func TestReadReadyDecodesAndChecksRequiredFields(t *testing.T) {
	writeReady(t, `{"endpoint": "http://127.0.0.1:1", "ca_file": null, "admin_url": ""}`)
	var r ready
	if err := ReadReady(&r, "endpoint"); err != nil || r.Endpoint != "http://127.0.0.1:1" {
		t.Fatalf("ReadReady: %v, %+v", err, r)
	}
	for _, missing := range []string{"admin_url", "ca_file", "region"} {
		err := ReadReady(&r, "endpoint", missing)
		if err == nil || !strings.Contains(err.Error(), "lacks endpoint/"+missing) {
			t.Errorf("%s: %v", missing, err)
		}
	}
	writeReady(t, `not json`)
	if err := ReadReady(&r); err == nil {
		t.Error("a ready file that is not JSON is refused")
	}
	t.Setenv(ReadyEnv, filepath.Join(t.TempDir(), "absent.json"))
	if err := ReadReady(&r); err == nil || !strings.Contains(err.Error(), "reading the ready file") {
		t.Errorf("absent file: %v", err)
	}
}

func TestCheckLeaksReadsBothReports(t *testing.T) {
	reports := map[string]string{
		"/clean/leaks":   `{"total": 0, "by_type": {}}`,
		"/left/leaks":    `{"total": 2, "by_type": {"port": 2}}`,
		"/listed/leaks":  `{"leaks": ["vm vm-42"]}`,
		"/nothing/leaks": `{"leaks": []}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := reports[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	defer srv.Close()
	for admin, want := range map[string]string{
		"/clean":   "",
		"/nothing": "",
		"/left":    "2 resources left behind: map[port:2]",
		"/listed":  "left behind: [vm vm-42]",
		"/missing": "404 Not Found",
	} {
		err := CheckLeaks(srv.Client(), srv.URL+admin)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: got %q, want %q", admin, got, want)
		}
	}
}

func TestAdminSendsJSONAndReadsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "no JSON", http.StatusBadRequest)
			return
		}
		var in map[string]any
		if r.Body != nil {
			json.NewDecoder(r.Body).Decode(&in)
		}
		if r.URL.Path == "/refuse" {
			http.Error(w, `{"error": "nope"}`, http.StatusConflict)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "got": in})
	}))
	defer srv.Close()
	var out struct {
		Method string         `json:"method"`
		Got    map[string]any `json:"got"`
	}
	if err := Admin(srv.Client(), srv.URL, "PUT", "/x", map[string]int{"n": 1}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Method != "PUT" || out.Got["n"] != 1.0 {
		t.Errorf("%+v", out)
	}
	err := Admin(srv.Client(), srv.URL, "POST", "/refuse", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("refusal: %v", err)
	}
}

func TestHTTPClientNeedsAUsableCAFile(t *testing.T) {
	if c, err := HTTPClient(""); err != nil || c.Timeout != 30*time.Second {
		t.Fatalf("no CA: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	if _, err := HTTPClient(bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("bad CA: %v", err)
	}
	if _, err := HTTPClient(bad + ".absent"); err == nil {
		t.Error("an absent CA file is refused")
	}
}

func TestWaitForPollsUntilDone(t *testing.T) {
	n := 0
	WaitFor(t, "three looks", time.Second, func() (bool, string, error) {
		n++
		return n == 3, "looking", nil
	})
	if n != 3 {
		t.Errorf("looked %d times", n)
	}
	ctx := ContextWithin(t, time.Hour)
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) < 59*time.Minute {
		t.Errorf("deadline %v", deadline)
	}
}
