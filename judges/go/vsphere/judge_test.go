// Package judge puts mock vSphere through govmomi at the version
// vsphere-cloud-controller-manager v1.36.0 pins, making the calls that CCM makes
// (pkg/common/vclib, pkg/common/connectionmanager): a SOAP session over HTTPS trusting
// the mock's CA, the datacenter list, SearchIndex lookups, the VM properties `config`,
// `summary` and `guest` through the property collector, and vAPI REST tagging for zones.
// govmomi decodes every answer with its own vim25 types.
//
// The tests read the mock's ready file (ccm-conformance mock vsphere --ready-file F) from
// CCM_JUDGE_READY and skip when it is unset; tests/go_judges.rs in the repository root
// starts the mock and runs them.
package judge

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"ccm-conformance.invalid/judges/judgekit"
)

// ready is the mock's ready object (mocks/vsphere/src/lib.rs ReadyInfo).
type ready struct {
	URL      string  `json:"url"`
	Username string  `json:"username"`
	Password string  `json:"password"`
	Insecure bool    `json:"insecure"`
	CAFile   *string `json:"ca_file"`
	AdminURL string  `json:"admin_url"`
}

func loadReady(t *testing.T) ready {
	t.Helper()
	var r ready
	judgekit.LoadReady(t, &r, "url", "username")
	return r
}

// soapClient is vclib's VSphereConnection.NewClient: soap.NewClient with the CA file
// (insecure stays false: the mock's certificate must verify), vim25.NewClient.
func soapClient(t *testing.T, ctx context.Context, r ready) *vim25.Client {
	t.Helper()
	u, err := soap.ParseURL(r.URL)
	if err != nil {
		t.Fatalf("soap.ParseURL(%q): %v", r.URL, err)
	}
	sc := soap.NewClient(u, r.Insecure)
	if r.CAFile != nil && *r.CAFile != "" {
		if err := sc.SetRootCAs(*r.CAFile); err != nil {
			t.Fatalf("SetRootCAs(%s): %v", *r.CAFile, err)
		}
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatalf("vim25.NewClient: %v", err)
	}
	return c
}

// loggedIn is a vim25 client with a session (SessionManager.Login, as vclib's login).
func loggedIn(t *testing.T, ctx context.Context, r ready) *vim25.Client {
	t.Helper()
	c := soapClient(t, ctx, r)
	m := session.NewManager(c)
	if err := m.Login(ctx, url.UserPassword(r.Username, r.Password)); err != nil {
		t.Fatalf("SessionManager.Login: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Logout(ctx); err != nil {
			t.Errorf("SessionManager.Logout: %v", err)
		}
	})
	return c
}
