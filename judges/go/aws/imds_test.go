package judge

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"ccm-conformance.invalid/judges/judgekit"
)

// The CCM's start on a node: feature/ec2/imds pointed at the mock's metadata endpoint
// (the `ec2imds` ServiceOverride), IMDSv2 only (no fallback to v1): token, identity
// document, instance-id, region and zone; then the instance role's credentials through
// ec2rolecreds, signing an EC2 call with their session token.
func TestIMDSv2(t *testing.T) {
	r := loadReady(t)
	if r.IMDSEndpoint == "" {
		t.Fatal("the ready file names no imds_endpoint: start the mock with IMDS on (`mock aws --imds`)")
	}
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{filter("tag:Name", "node-1")},
	})
	if err != nil || countInstances(out) != 1 {
		t.Fatalf("DescribeInstances tag:Name=node-1: %v", err)
	}
	self := out.Reservations[0].Instances[0]
	id := aws.ToString(self.InstanceId)
	adminCall(t, r, "PUT", "/imds", map[string]any{"instance_id": id}, nil)
	t.Cleanup(func() { adminCall(t, r, "PUT", "/imds", map[string]any{"instance_id": nil}, nil) })

	client := imds.New(imds.Options{
		Endpoint:       r.IMDSEndpoint,
		EnableFallback: aws.FalseTernary,
	})
	doc, err := client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatalf("GetInstanceIdentityDocument: %v", err)
	}
	d := doc.InstanceIdentityDocument
	if d.InstanceID != id || d.Region != r.Region || d.AvailabilityZone != aws.ToString(self.Placement.AvailabilityZone) ||
		d.PrivateIP != aws.ToString(self.PrivateIpAddress) || d.InstanceType != string(self.InstanceType) ||
		d.AccountID == "" || d.ImageID == "" || d.Architecture == "" || d.Version == "" || d.PendingTime.IsZero() {
		t.Errorf("identity document %+v does not describe %s", d, id)
	}

	got, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
	if err != nil {
		t.Fatalf("GetMetadata instance-id: %v", err)
	}
	text, err := io.ReadAll(got.Content)
	got.Content.Close()
	if err != nil || string(text) != id {
		t.Errorf("instance-id %q (%v), want %s", text, err, id)
	}
	region, err := client.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil || region.Region != r.Region {
		t.Errorf("GetRegion: %+v %v", region, err)
	}
	zone, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "placement/availability-zone"})
	if err != nil {
		t.Fatalf("GetMetadata placement/availability-zone: %v", err)
	}
	text, _ = io.ReadAll(zone.Content)
	zone.Content.Close()
	if string(text) != aws.ToString(self.Placement.AvailabilityZone) {
		t.Errorf("availability zone %q", text)
	}
	if _, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "no/such/path"}); err == nil {
		t.Errorf("GetMetadata of an unknown path succeeded")
	}
	info, err := client.GetIAMInfo(ctx, &imds.GetIAMInfoInput{})
	if err != nil {
		t.Fatalf("GetIAMInfo: %v", err)
	}
	if info.Code != "Success" || !strings.Contains(info.InstanceProfileArn, ":instance-profile/") ||
		info.InstanceProfileID == "" || info.LastUpdated.IsZero() {
		t.Errorf("IAM info %+v", info.IAMInfo)
	}

	// The instance role: temporary credentials, accepted with their session token.
	provider := ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = client })
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		t.Fatalf("ec2rolecreds Retrieve: %v", err)
	}
	if !strings.HasPrefix(creds.AccessKeyID, "ASIA") || creds.SessionToken == "" || !creds.CanExpire ||
		!creds.Expires.After(time.Now()) {
		t.Errorf("role credentials %+v", creds)
	}
	cfg := sdkConfig(t, ctx, r, aws.NewCredentialsCache(provider))
	roleEC2 := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(r.Endpoint) })
	if _, err := roleEC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Errorf("DescribeInstances signed with the role's credentials: %v", err)
	}
}
