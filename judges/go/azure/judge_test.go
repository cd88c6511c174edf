// Package judge puts mock Azure through the Azure SDK for Go at the versions
// cloud-provider-azure v1.36.5 pins in its go.mod (azcore v1.22.0, azidentity v1.14.0,
// armcompute/v7 v7.3.0, armnetwork/v9 v9.0.0, armresources v1.2.0), decoding every answer
// with the SDK's own models, pollers, pagers and error type, so a status code, header,
// field type or long-running-operation shape real ARM would not send fails here.
//
// The tests read the mock's ready file (ccm-conformance mock azure --ready-file F) from
// CCM_JUDGE_READY and skip when it is unset; tests/go_judges.rs in the repository root
// starts the mock and runs them. The mock serves HTTPS only; the clients trust its CA
// (ready.ca_file) through their transport, as the upstream CCM trusts it through
// SSL_CERT_FILE.
package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"ccm-conformance.invalid/judges/judgekit"
)

// audience is the ARM token audience of the wire contract (Azure public cloud's
// `activeDirectoryResourceId`; the mock's discovery document names it first).
const audience = "https://management.core.windows.net/"

// ready is the mock's ready object (mocks/azure/src/lib.rs ReadyInfo).
type ready struct {
	Endpoint          string `json:"endpoint"`
	TenantID          string `json:"tenant_id"`
	SubscriptionID    string `json:"subscription_id"`
	ResourceGroup     string `json:"resource_group"`
	Location          string `json:"location"`
	ClientID          string `json:"client_id"`
	ClientSecret      string `json:"client_secret"`
	CAFile            string `json:"ca_file"`
	AdminURL          string `json:"admin_url"`
	IdentityEndpoint  string `json:"identity_endpoint"`
	IdentityHeader    string `json:"identity_header"`
	VnetName          string `json:"vnet_name"`
	SubnetName        string `json:"subnet_name"`
	SecurityGroupName string `json:"security_group_name"`
	RouteTableName    string `json:"route_table_name"`
}

var required = []string{"endpoint", "subscription_id", "client_secret", "ca_file"}

func readReady() (ready, error) {
	var r ready
	err := judgekit.ReadReady(&r, required...)
	return r, err
}

func loadReady(t *testing.T) ready {
	t.Helper()
	var r ready
	judgekit.LoadReady(t, &r, required...)
	return r
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	return judgekit.ContextWithin(t, 2*time.Minute)
}

// newHTTPClient trusts only the mock's CA: a client that ignored it could not connect.
func newHTTPClient(r ready) (*http.Client, error) {
	return judgekit.HTTPClient(r.CAFile)
}

func httpClient(t *testing.T, r ready) *http.Client {
	t.Helper()
	c, err := newHTTPClient(r)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cloudConfig is the mock as a cloud: AAD and ARM both at the endpoint, with the
// contract's audience (what azclient builds from the discovery document,
// cloud-provider-azure pkg/azclient/cloud.go).
func cloudConfig(r ready) cloud.Configuration {
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: r.Endpoint + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: r.Endpoint, Audience: audience},
		},
	}
}

// clientOptions: the mock's cloud and CA, few quick retries (a judge should fail fast,
// not wait out the SDK's default back-off).
func clientOptions(t *testing.T, r ready) azcore.ClientOptions {
	t.Helper()
	return azcore.ClientOptions{
		Cloud:     cloudConfig(r),
		Transport: httpClient(t, r),
		Retry:     policy.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second},
	}
}

// secretCredential is the client-secret route with instance discovery off (MSAL would
// otherwise ask login.microsoftonline.com about the mock's host).
func secretCredential(t *testing.T, r ready) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(r.TenantID, r.ClientID, r.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{
			ClientOptions:            clientOptions(t, r),
			DisableInstanceDiscovery: true,
		})
	if err != nil {
		t.Fatalf("NewClientSecretCredential: %v", err)
	}
	return cred
}

// armOptions: what azclient gives every ARM client, plus the If-Match policy of
// cloud-provider-azure pkg/azclient/policy/etag (a PUT whose body carries the etag read
// earlier is sent with `If-Match: <that etag>`), so a judge writes the way the CCM does.
func armOptions(t *testing.T, r ready) *arm.ClientOptions {
	t.Helper()
	opts := clientOptions(t, r)
	opts.PerCallPolicies = append(opts.PerCallPolicies, bodyEtagPolicy{})
	return &arm.ClientOptions{ClientOptions: opts}
}

// bodyEtagPolicy copies a write's body `etag` into `If-Match`.
type bodyEtagPolicy struct{}

func (bodyEtagPolicy) Do(req *policy.Request) (*http.Response, error) {
	m := req.Raw().Method
	if (m == http.MethodPut || m == http.MethodPatch) && req.Body() != nil {
		data, err := io.ReadAll(req.Body())
		if err != nil {
			return nil, err
		}
		var body struct {
			Etag string `json:"etag"`
		}
		if json.Unmarshal(data, &body) == nil && body.Etag != "" {
			req.Raw().Header.Set("If-Match", body.Etag)
		}
		if err := req.RewindBody(); err != nil {
			return nil, err
		}
	}
	return req.Next()
}

// responseError asserts err is an ARM error with this status and code.
func responseError(t *testing.T, err error, status int, code string) *azcore.ResponseError {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %d %s, got success", status, code)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("expected an *azcore.ResponseError (%d %s), got %T: %v", status, code, err, err)
	}
	if re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("expected %d %s, got %d %q: %v", status, code, re.StatusCode, re.ErrorCode, err)
	}
	return re
}

// resourceID is an ARM id in the mock's subscription and resource group.
func resourceID(r ready, provider, typ, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s/%s/%s",
		r.SubscriptionID, r.ResourceGroup, provider, typ, name)
}

// uniqueName makes names that do not collide between runs against one mock.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// sameID compares ARM ids as ARM does: case-insensitively.
func sameID(a, b string) bool { return strings.EqualFold(a, b) }
