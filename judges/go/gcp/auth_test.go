package judge

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/compute/metadata"
	"golang.org/x/oauth2/google"
	compute "google.golang.org/api/compute/v1"

	"ccm-conformance.invalid/judges/judgekit"
)

// TestMetadataServer: what cloud.google.com/go/compute/metadata and golang.org/x/oauth2
// read from the mock's metadata server, as the upstream CCM on a node does:
// OnGCE (GCE_METADATA_HOST set), the project, the zone, the default service account's
// token through ComputeTokenSource (gce.conf without token-url) and through the
// application default credentials (token-url = nil).
func TestMetadataServer(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	if !metadata.OnGCE() {
		t.Fatal("metadata.OnGCE() = false with GCE_METADATA_HOST at the mock")
	}
	project, err := metadata.ProjectIDWithContext(ctx)
	if err != nil || project != r.ProjectID {
		t.Fatalf("ProjectID = %q, %v; want %q", project, err, r.ProjectID)
	}
	zone, err := metadata.ZoneWithContext(ctx)
	if err != nil || zone != r.Zone {
		t.Fatalf("Zone = %q, %v; want %q", zone, err, r.Zone)
	}
	name, err := metadata.InstanceNameWithContext(ctx)
	if err != nil || name == "" {
		t.Fatalf("InstanceName = %q, %v", name, err)
	}
	if _, err := metadata.InstanceAttributeValueWithContext(ctx, "no-such-attribute"); err == nil {
		t.Fatal("a missing attribute was found")
	} else if _, ok := err.(metadata.NotDefinedError); !ok {
		t.Fatalf("missing attribute: %T %v, want metadata.NotDefinedError", err, err)
	}

	seq := lastSeq(t, r)
	tok, err := google.ComputeTokenSource("").Token()
	if err != nil {
		t.Fatalf("ComputeTokenSource: %v", err)
	}
	if tok.AccessToken == "" || tok.TokenType != "Bearer" || tok.Expiry.IsZero() {
		t.Fatalf("token %+v", tok)
	}
	creds, err := google.FindDefaultCredentials(context.Background(), compute.CloudPlatformScope)
	if err != nil {
		t.Fatalf("FindDefaultCredentials: %v", err)
	}
	tok2, err := creds.TokenSource.Token()
	if err != nil || tok2.AccessToken == "" {
		t.Fatalf("default credentials' token: %+v, %v", tok2, err)
	}
	if project, err := metadata.ProjectIDWithContext(ctx); err != nil || creds.ProjectID != project {
		t.Fatalf("default credentials' project %q, metadata's %q (%v)", creds.ProjectID, project, err)
	}
	tokens := 0
	for _, e := range journalSince(t, r, seq) {
		if e.Service == "metadata" && strings.HasSuffix(e.Operation, "/token") {
			tokens++
			if e.Status != 200 {
				t.Errorf("token from the metadata server: %d", e.Status)
			}
		}
	}
	if tokens < 2 {
		t.Errorf("%d tokens fetched from the metadata server, want 2", tokens)
	}
}
