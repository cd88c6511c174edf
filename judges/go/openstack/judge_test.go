// Package judge puts mock OpenStack through gophercloud v2 at the version
// openstack-cloud-controller-manager v1.36.0 pins, decoding every answer with the SDK's
// own result extractors (time formats, field types and pagination are the SDK's).
//
// The tests read the mock's ready file (ccm-conformance mock openstack --ready-file F)
// from CCM_JUDGE_READY and skip when it is unset; tests/go_judges.rs in the repository
// root starts the mock and runs them.
package judge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
)

// ready is the mock's ready object (mocks/openstack/src/lib.rs ReadyInfo).
type ready struct {
	AuthURL     string  `json:"auth_url"`
	Username    string  `json:"username"`
	Password    string  `json:"password"`
	ProjectName string  `json:"project_name"`
	DomainName  string  `json:"domain_name"`
	Region      string  `json:"region"`
	AdminURL    string  `json:"admin_url"`
	CAFile      *string `json:"ca_file"`
}

func loadReady(t *testing.T) ready {
	t.Helper()
	path := os.Getenv("CCM_JUDGE_READY")
	if path == "" {
		t.Skip("CCM_JUDGE_READY is not set (tests/go_judges.rs starts the mock and sets it)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the ready file: %v", err)
	}
	var r ready
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("ready file %s: %v", path, err)
	}
	if r.AuthURL == "" || r.Username == "" {
		t.Fatalf("ready file %s lacks auth_url/username: %s", path, data)
	}
	return r
}

// httpClient trusts the mock's CA when it serves HTTPS, as the CCM's `ca-file` does.
func httpClient(t *testing.T, r ready) http.Client {
	t.Helper()
	c, err := newHTTPClient(r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newHTTPClient(r ready) (http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if r.CAFile != nil && *r.CAFile != "" {
		pem, err := os.ReadFile(*r.CAFile)
		if err != nil {
			return http.Client{}, fmt.Errorf("reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return http.Client{}, fmt.Errorf("ca_file %s holds no PEM certificate", *r.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return http.Client{Transport: transport, Timeout: 30 * time.Second}, nil
}

func authOptions(r ready) gophercloud.AuthOptions {
	return gophercloud.AuthOptions{
		IdentityEndpoint: r.AuthURL,
		Username:         r.Username,
		Password:         r.Password,
		DomainName:       r.DomainName,
		TenantName:       r.ProjectName,
		AllowReauth:      true,
	}
}

// provider authenticates with the password, as the CCM's cloud.conf [Global] does.
func provider(t *testing.T, ctx context.Context, r ready) *gophercloud.ProviderClient {
	t.Helper()
	pc, err := openstack.NewClient(r.AuthURL)
	if err != nil {
		t.Fatalf("openstack.NewClient: %v", err)
	}
	pc.HTTPClient = httpClient(t, r)
	if err := openstack.Authenticate(ctx, pc, authOptions(r)); err != nil {
		t.Fatalf("openstack.Authenticate: %v", err)
	}
	return pc
}

func endpointOpts(r ready) gophercloud.EndpointOpts {
	return gophercloud.EndpointOpts{Region: r.Region, Availability: gophercloud.AvailabilityPublic}
}

type clients struct {
	compute, network, lb *gophercloud.ServiceClient
}

func services(t *testing.T, ctx context.Context, r ready) clients {
	t.Helper()
	pc := provider(t, ctx, r)
	eo := endpointOpts(r)
	compute, err := openstack.NewComputeV2(pc, eo)
	if err != nil {
		t.Fatalf("NewComputeV2 (catalog type compute): %v", err)
	}
	network, err := openstack.NewNetworkV2(pc, eo)
	if err != nil {
		t.Fatalf("NewNetworkV2 (catalog type network): %v", err)
	}
	lb, err := openstack.NewLoadBalancerV2(pc, eo)
	if err != nil {
		t.Fatalf("NewLoadBalancerV2 (catalog type load-balancer): %v", err)
	}
	return clients{compute: compute, network: network, lb: lb}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// is404 says whether err is the SDK's "resource not found".
func is404(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}

// waitFor polls check every 20 ms until it reports done, failing the test at the deadline.
func waitFor(t *testing.T, what string, timeout time.Duration, check func() (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, state, err := check()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still %q after %s", what, last, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nonZeroTime fails when the SDK decoded no time (a missing field).
func nonZeroTime(t *testing.T, what string, v time.Time) {
	t.Helper()
	if v.IsZero() {
		t.Errorf("%s: the SDK decoded a zero time", what)
	}
}

// unexpected wraps an SDK error with the call that produced it.
func unexpected(call string, err error) error {
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return fmt.Errorf("%s: HTTP %d from %s %s: %s", call, code.Actual, code.Method, code.URL, code.Body)
	}
	return fmt.Errorf("%s: %w", call, err)
}
