// Package judge puts mock GCE through the Go clients cloud-provider-gcp's providers
// module pins in its go.mod (google.golang.org/api v0.292.0 compute v1/beta/alpha,
// k8s-cloud-provider v1.35.0, golang.org/x/oauth2 v0.36.0,
// cloud.google.com/go/compute/metadata v0.9.0), built the way providers/gce/gce.go
// CreateGCECloud builds them: no token-url, so credentials are the application default
// ones, which here are the metadata server's (GCE_METADATA_HOST names the mock); the
// v1, beta and alpha services with their BasePath set from the api-endpoint (v1 swapped
// for beta and alpha); a cloud.Service with upstream's project router and rate limiter
// (operation polls at most 5 a second and at least a second apart), and cloud.NewGCE.
// Every answer is decoded by the generated clients, and every write waits on its
// operation with POST .../operations/{op}/wait as k8s-cloud-provider does.
//
// The tests read the mock's ready file (ccm-conformance mock gcp --ready-file F) from
// CCM_JUDGE_READY and skip when it is unset; tests/go_judges.rs in the repository root
// starts the mock and runs them.
package judge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	"golang.org/x/oauth2/google"
	computealpha "google.golang.org/api/compute/v0.alpha"
	computebeta "google.golang.org/api/compute/v0.beta"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"ccm-conformance.invalid/judges/judgekit"
)

// ready is the mock's ready object (mocks/gcp/src/lib.rs ReadyInfo).
type ready struct {
	Endpoint     string `json:"endpoint"`
	ProjectID    string `json:"project_id"`
	Region       string `json:"region"`
	Zone         string `json:"zone"`
	Network      string `json:"network"`
	MetadataHost string `json:"metadata_host"`
	TokenURL     string `json:"token_url"`
	AdminURL     string `json:"admin_url"`
}

var required = []string{"endpoint", "project_id", "metadata_host", "admin_url"}

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

// projectRouter is providers/gce/support.go gceProjectRouter (no XPN here: the network
// project is the project).
type projectRouter struct{ project string }

func (r *projectRouter) ProjectID(ctx context.Context, version meta.Version, service string) string {
	return r.project
}

// operationPollInterval is providers/gce/gce.go's.
const operationPollInterval = time.Second

// rateLimiter is providers/gce/support.go gceRateLimiter: operation polls go through a
// 5 qps, burst 5 token bucket (gce.go operationPollRateLimiter) and at least
// operationPollInterval apart; everything else is let through. The bucket is
// x/time/rate-free: a channel refilled 5 times a second.
type rateLimiter struct {
	once   sync.Once
	tokens chan struct{}
}

func (l *rateLimiter) bucket() chan struct{} {
	l.once.Do(func() {
		l.tokens = make(chan struct{}, 5)
		for range 5 {
			l.tokens <- struct{}{}
		}
		go func() {
			for range time.Tick(200 * time.Millisecond) {
				select {
				case l.tokens <- struct{}{}:
				default:
				}
			}
		}()
	})
	return l.tokens
}

func (l *rateLimiter) Accept(ctx context.Context, key *cloud.RateLimitKey) error {
	if key.Operation == "Get" && key.Service == "Operations" {
		rl := &cloud.MinimumRateLimiter{
			RateLimiter: &tokenAcceptor{tokens: l.bucket()},
			Minimum:     operationPollInterval,
		}
		return rl.Accept(ctx, key)
	}
	return nil
}

func (*rateLimiter) Observe(context.Context, error, *cloud.RateLimitKey) {}

type tokenAcceptor struct{ tokens chan struct{} }

func (a *tokenAcceptor) Accept(ctx context.Context, _ *cloud.RateLimitKey) error {
	select {
	case <-a.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (*tokenAcceptor) Observe(context.Context, error, *cloud.RateLimitKey) {}

// gce is what CreateGCECloud keeps: the three services and the k8s-cloud-provider GCE.
type gce struct {
	r     ready
	ga    *compute.Service
	beta  *computebeta.Service
	alpha *computealpha.Service
	c     *cloud.GCE
}

// newGCE builds the clients as providers/gce/gce.go CreateGCECloud does with
// `api-endpoint` set and no `token-url` (clientOptions(nil): application default
// credentials with the cloud-platform scope and their universe domain).
func newGCE(t *testing.T) *gce {
	t.Helper()
	r := loadReady(t)
	ctx := context.Background()
	creds, err := google.FindDefaultCredentials(ctx, compute.CloudPlatformScope)
	if err != nil {
		t.Fatalf("FindDefaultCredentials: %v", err)
	}
	if len(creds.JSON) > 0 {
		t.Fatalf("default credentials came from a file, not the metadata server: %s", creds.JSON)
	}
	opts := []option.ClientOption{option.WithCredentials(creds)}
	ud, err := creds.GetUniverseDomain()
	if err != nil {
		t.Fatalf("GetUniverseDomain: %v", err)
	}
	opts = append(opts, option.WithUniverseDomain(ud))
	ga, err := compute.NewService(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := computebeta.NewService(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := computealpha.NewService(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := r.Endpoint
	if strings.HasSuffix(ga.BasePath, "/projects/") {
		ga.BasePath = projectsBasePath(endpoint)
		beta.BasePath = projectsBasePath(strings.Replace(endpoint, "v1", "beta", -1))
		alpha.BasePath = projectsBasePath(strings.Replace(endpoint, "v1", "alpha", -1))
	} else {
		ga.BasePath = endpoint
		beta.BasePath = strings.Replace(endpoint, "v1", "beta", -1)
		alpha.BasePath = strings.Replace(endpoint, "v1", "alpha", -1)
	}
	s := &cloud.Service{
		GA:            ga,
		Alpha:         alpha,
		Beta:          beta,
		ProjectRouter: &projectRouter{project: r.ProjectID},
		RateLimiter:   &rateLimiter{},
	}
	return &gce{r: r, ga: ga, beta: beta, alpha: alpha, c: cloud.NewGCE(s)}
}

// projectsBasePath is providers/gce/gce.go getProjectsBasePath.
func projectsBasePath(basePath string) string {
	if !strings.HasSuffix(basePath, "/") {
		basePath += "/"
	}
	if !strings.HasSuffix(basePath, "/projects/") {
		basePath += "projects/"
	}
	return basePath
}

// networkURL is providers/gce/gce.go gceNetworkURL with the api-endpoint set.
func (g *gce) networkURL() string {
	return g.r.Endpoint + strings.Join([]string{"projects", g.r.ProjectID, "global", "networks", g.r.Network}, "/")
}

// isHTTPErrorCode and isNotFound are providers/gce/gce_util.go's.
func isHTTPErrorCode(err error, code int) bool {
	apiErr, ok := err.(*googleapi.Error)
	return ok && apiErr.Code == code
}

func isNotFound(err error) bool {
	return isHTTPErrorCode(err, http.StatusNotFound)
}

// reason is Google's error.errors[0].reason, when the client decoded one.
func reason(err error) string {
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) && len(apiErr.Errors) > 0 {
		return apiErr.Errors[0].Reason
	}
	return ""
}

// admin calls the mock's control API; out (if not nil) receives the JSON answer.
func admin(r ready, method, path string, body any, out any) error {
	return judgekit.Admin(http.DefaultClient, r.AdminURL, method, path, body, out)
}

// journalEntry is one of the mock's journal entries (mock_cloud::JournalEntry).
type journalEntry struct {
	Seq       uint64 `json:"seq"`
	Service   string `json:"service"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	Query     string `json:"query"`
	Status    int    `json:"status"`
	Operation string `json:"operation"`
	Resource  string `json:"resource"`
}

func journalSince(t *testing.T, r ready, seq uint64) []journalEntry {
	t.Helper()
	var j struct {
		Entries []journalEntry `json:"entries"`
	}
	if err := admin(r, "GET", fmt.Sprintf("/journal?since=%d", seq), nil, &j); err != nil {
		t.Fatal(err)
	}
	return j.Entries
}

func lastSeq(t *testing.T, r ready) uint64 {
	t.Helper()
	entries := journalSince(t, r, 0)
	if len(entries) == 0 {
		return 0
	}
	return entries[len(entries)-1].Seq
}

// setLifecycle sets the mock's operation lifecycle for a collection or a resource name
// (nil mode: back to the default) and restores it when the test ends.
func setLifecycle(t *testing.T, r ready, target, name string, mode any) {
	t.Helper()
	body := map[string]any{"target": target, "name": name, "mode": mode}
	if err := admin(r, "PUT", "/lifecycle", body, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		body["mode"] = nil
		if err := admin(r, "PUT", "/lifecycle", body, nil); err != nil {
			t.Error(err)
		}
	})
}
