// Package judge puts mock AWS through aws-sdk-go-v2 at the versions
// k8s.io/cloud-provider-aws v1.37.0 pins: EC2, ELB and ELBv2 clients with BaseEndpoint
// set per client (what the CCM's [ServiceOverride] resolvers do) and static
// credentials, plus feature/ec2/imds against the mock's instance metadata service.
// Every answer is decoded by the SDK's own deserializers.
//
// The tests read the mock's ready file (ccm-conformance mock aws --ready-file F) from
// CCM_JUDGE_READY and skip when it is unset; tests/go_judges.rs in the repository root
// starts the mock and runs them.
package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
)

// ready is the mock's ready object (mocks/aws/src/lib.rs ReadyInfo).
type ready struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	AdminURL        string `json:"admin_url"`
	IMDSEndpoint    string `json:"imds_endpoint"`
}

func readReady() (ready, error) {
	var r ready
	path := os.Getenv("CCM_JUDGE_READY")
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("reading the ready file: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("ready file %s: %w", path, err)
	}
	if r.Endpoint == "" || r.AccessKeyID == "" {
		return r, fmt.Errorf("ready file %s lacks endpoint/access_key_id: %s", path, data)
	}
	return r, nil
}

func loadReady(t *testing.T) ready {
	t.Helper()
	if os.Getenv("CCM_JUDGE_READY") == "" {
		t.Skip("CCM_JUDGE_READY is not set (tests/go_judges.rs starts the mock and sets it)")
	}
	r, err := readReady()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sdkConfig is the CCM's: LoadDefaultConfig with the region and static credentials, no
// shared files (so the machine's ~/.aws cannot change the outcome).
func sdkConfig(t *testing.T, ctx context.Context, r ready, creds aws.CredentialsProvider) aws.Config {
	t.Helper()
	if creds == nil {
		creds = credentials.NewStaticCredentialsProvider(r.AccessKeyID, r.SecretAccessKey, "")
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(r.Region),
		config.WithCredentialsProvider(creds),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		t.Fatalf("config.LoadDefaultConfig: %v", err)
	}
	return cfg
}

type clients struct {
	ec2   *ec2.Client
	elb   *elb.Client
	elbv2 *elbv2.Client
}

func newClients(t *testing.T, ctx context.Context, r ready) clients {
	t.Helper()
	cfg := sdkConfig(t, ctx, r, nil)
	return clients{
		ec2:   ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(r.Endpoint) }),
		elb:   elb.NewFromConfig(cfg, func(o *elb.Options) { o.BaseEndpoint = aws.String(r.Endpoint) }),
		elbv2: elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = aws.String(r.Endpoint) }),
	}
}

// errorCode is the AWS error code the SDK decoded ("" for a non-API error).
func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// adminCall sends one request to the mock's control API and decodes a JSON answer into
// out (when not nil).
func adminCall(t *testing.T, r ready, method, path string, body any, out any) {
	t.Helper()
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, r.AdminURL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("admin %s %s: %s %s", method, path, resp.Status, text)
	}
	if out != nil {
		if err := json.Unmarshal(text, out); err != nil {
			t.Fatalf("admin %s %s: %v in %s", method, path, err, text)
		}
	}
}

// waitFor polls check every 20 ms until it reports done, failing the test at the deadline.
func waitFor(t *testing.T, what string, timeout time.Duration, check func() (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state, err := check()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still %q after %s", what, state, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMain runs the tests, then asks the mock what the cloud APIs created and still
// exists: every test cleans up after itself, as the CCM must.
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
	resp, err := http.Get(r.AdminURL + "/leaks")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var leaks struct {
		Leaks []string `json:"leaks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&leaks); err != nil {
		return fmt.Errorf("GET /admin/leaks (%s): %w", resp.Status, err)
	}
	if len(leaks.Leaks) != 0 {
		return fmt.Errorf("left behind: %v", leaks.Leaks)
	}
	return nil
}
