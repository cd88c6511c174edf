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
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"ccm-conformance.invalid/judges/judgekit"
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
	var r ready
	judgekit.LoadReady(t, &r, "auth_url", "username")
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
	caFile := ""
	if r.CAFile != nil {
		caFile = *r.CAFile
	}
	c, err := judgekit.HTTPClient(caFile)
	if err != nil {
		return http.Client{}, err
	}
	return *c, nil
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

// is404 says whether err is the SDK's "resource not found".
func is404(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
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
