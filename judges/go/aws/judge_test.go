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
	"context"
	"errors"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"

	"ccm-conformance.invalid/judges/judgekit"
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
	err := judgekit.ReadReady(&r, "endpoint", "access_key_id")
	return r, err
}

func loadReady(t *testing.T) ready {
	t.Helper()
	var r ready
	judgekit.LoadReady(t, &r, "endpoint", "access_key_id")
	return r
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
	if err := judgekit.Admin(http.DefaultClient, r.AdminURL, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// TestMain runs the tests, then asks the mock what the cloud APIs created and still
// exists: every test cleans up after itself, as the CCM must.
func TestMain(m *testing.M) {
	os.Exit(judgekit.Run(m, checkLeaks))
}

func checkLeaks() error {
	r, err := readReady()
	if err != nil {
		return err
	}
	return judgekit.CheckLeaks(http.DefaultClient, r.AdminURL)
}
