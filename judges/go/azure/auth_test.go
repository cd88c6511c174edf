package judge

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// TestDiscoveryDocument reads `<endpoint>/metadata/endpoints?api-version=2019-05-01` the
// way cloud-provider-azure pkg/azclient/cloud.go does (a JSON array; resourceManager,
// authentication.loginEndpoint, authentication.audiences[0] are used) and checks that it
// points the CCM back at the mock.
func TestDiscoveryDocument(t *testing.T) {
	r := loadReady(t)
	resp, err := httpClient(t, r).Get(r.Endpoint + "/metadata/endpoints?api-version=2019-05-01")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metadata/endpoints: %s", resp.Status)
	}
	var doc []struct {
		Name            string `json:"name"`
		ResourceManager string `json:"resourceManager"`
		Authentication  struct {
			Audiences     []string `json:"audiences"`
			LoginEndpoint string   `json:"loginEndpoint"`
		} `json:"authentication"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("the discovery document is not a JSON array of clouds: %v", err)
	}
	if len(doc) == 0 {
		t.Fatal("the discovery document lists no cloud")
	}
	c := doc[0]
	if c.Name == "" {
		t.Error("the cloud has no name (azclient matches it against azure.json `cloud`)")
	}
	if strings.TrimSuffix(c.ResourceManager, "/") != r.Endpoint {
		t.Errorf("resourceManager %q, want %s/", c.ResourceManager, r.Endpoint)
	}
	if strings.TrimSuffix(c.Authentication.LoginEndpoint, "/") != r.Endpoint {
		t.Errorf("loginEndpoint %q, want %s/", c.Authentication.LoginEndpoint, r.Endpoint)
	}
	// azclient indexes audiences[0] without a length check: an empty list panics the CCM.
	if len(c.Authentication.Audiences) == 0 || c.Authentication.Audiences[0] != audience {
		t.Errorf("audiences %v, want %q first", c.Authentication.Audiences, audience)
	}
}

// TestClientSecretCredential: the v2 client-credentials flow (OpenID discovery of the
// tenant, then POST /{tenant}/oauth2/v2.0/token) with ARM's scope, as every ARM client
// asks it (azcore arm/runtime/pipeline.go: audience + "/.default", which with the
// trailing-slash audience is ".../" + "/.default").
func TestClientSecretCredential(t *testing.T) {
	r := loadReady(t)
	ctx := ctxFor(t)
	cred := secretCredential(t, r)
	for _, scope := range []string{audience + "/.default", strings.TrimSuffix(audience, "/") + "/.default"} {
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
		if err != nil {
			t.Fatalf("GetToken(%s): %v", scope, err)
		}
		if tok.Token == "" || strings.Count(tok.Token, ".") != 2 {
			t.Errorf("GetToken(%s): token %q is not JWT-shaped", scope, tok.Token)
		}
		if tok.ExpiresOn.IsZero() {
			t.Errorf("GetToken(%s): no expiry", scope)
		}
	}
}

// TestADFSCredential: tenant `adfs`, the route the upstream CCM can take offline
// (azidentity turns MSAL's instance discovery off for it; MSAL then reads
// /adfs/.well-known/openid-configuration and posts to the token_endpoint it names).
func TestADFSCredential(t *testing.T) {
	r := loadReady(t)
	cred, err := azidentity.NewClientSecretCredential("adfs", r.ClientID, r.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: clientOptions(t, r)})
	if err != nil {
		t.Fatalf("NewClientSecretCredential(adfs): %v", err)
	}
	tok, err := cred.GetToken(ctxFor(t), policy.TokenRequestOptions{Scopes: []string{strings.TrimSuffix(audience, "/") + "/.default"}})
	if err != nil {
		t.Fatalf("GetToken (adfs): %v", err)
	}
	if tok.Token == "" {
		t.Fatal("empty ADFS token")
	}
}

// TestWrongSecretIsInvalidClient: a wrong secret is refused with 401 invalid_client, which
// azidentity reports as an AuthenticationFailedError carrying the response.
func TestWrongSecretIsInvalidClient(t *testing.T) {
	r := loadReady(t)
	cred, err := azidentity.NewClientSecretCredential(r.TenantID, r.ClientID, "not-"+r.ClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: clientOptions(t, r), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cred.GetToken(ctxFor(t), policy.TokenRequestOptions{Scopes: []string{audience + "/.default"}})
	var afe *azidentity.AuthenticationFailedError
	if !errors.As(err, &afe) {
		t.Fatalf("expected an AuthenticationFailedError, got %T: %v", err, err)
	}
	if afe.RawResponse == nil || afe.RawResponse.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expected a 401 response, got %v", err)
	}
	if !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("expected invalid_client in %v", err)
	}
}

// TestManagedIdentityCredential: the App Service managed identity (IDENTITY_ENDPOINT +
// IDENTITY_HEADER; MSAL apps/managedidentity createAppServiceAuthRequest: GET with
// api-version=2019-08-01, resource, and the X-IDENTITY-HEADER header).
func TestManagedIdentityCredential(t *testing.T) {
	r := loadReady(t)
	if r.IdentityEndpoint == "" || r.IdentityHeader == "" {
		t.Fatalf("ready file lacks identity_endpoint/identity_header")
	}
	t.Setenv("IDENTITY_ENDPOINT", r.IdentityEndpoint)
	t.Setenv("IDENTITY_HEADER", r.IdentityHeader)
	cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: clientOptions(t, r)})
	if err != nil {
		t.Fatalf("NewManagedIdentityCredential: %v", err)
	}
	tok, err := cred.GetToken(ctxFor(t), policy.TokenRequestOptions{Scopes: []string{strings.TrimSuffix(audience, "/") + "/.default"}})
	if err != nil {
		t.Fatalf("GetToken (managed identity): %v", err)
	}
	if tok.Token == "" || tok.ExpiresOn.IsZero() {
		t.Fatalf("managed identity token %+v", tok)
	}

	// A wrong header is refused (MSAL's token cache is keyed by resource, so ask another
	// audience the mock accepts to reach the endpoint again).
	t.Setenv("IDENTITY_HEADER", "not-"+r.IdentityHeader)
	bad, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: clientOptions(t, r)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.GetToken(ctxFor(t), policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com/.default"}}); err == nil {
		t.Fatal("a wrong X-IDENTITY-HEADER got a token")
	}
}

// TestARMRefusesMissingAndForeignTokens: ARM's 401s carry their error code and a
// WWW-Authenticate challenge (azcore's bearer policy reads it).
func TestARMRefusesMissingAndForeignTokens(t *testing.T) {
	r := loadReady(t)
	c := httpClient(t, r)
	url := r.Endpoint + "/subscriptions/" + r.SubscriptionID + "/resourceGroups/" + r.ResourceGroup +
		"/providers/Microsoft.Network/loadBalancers?api-version=2024-05-01"
	for _, tc := range []struct{ auth, code string }{
		{"", "AuthenticationFailed"},
		{"Bearer e30.e30.c2ln", "InvalidAuthenticationToken"},
	} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != tc.code {
			t.Errorf("Authorization %q: %s %q, want 401 %s", tc.auth, resp.Status, body.Error.Code, tc.code)
		}
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: WWW-Authenticate %q", tc.auth, resp.Header.Get("WWW-Authenticate"))
		}
	}
}
