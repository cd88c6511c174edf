package judge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"ccm-conformance.invalid/judges/judgekit"
)

const clusterTag = "kubernetes.io/cluster/ccm-conformance"

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

// DescribeInstances as the CCM calls it: by instance id, by private DNS name, by tag and
// state filters, and paged with MaxResults / NextToken (the paginator follows the tokens).
func TestEC2DescribeInstances(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)

	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{filter("instance-state-name", "running"), filter("tag-key", clusterTag)},
	})
	if err != nil {
		t.Fatalf("DescribeInstances: %v", err)
	}
	var seeded []types.Instance
	for _, res := range out.Reservations {
		if aws.ToString(res.ReservationId) == "" || aws.ToString(res.OwnerId) == "" {
			t.Errorf("reservation %+v lacks id or owner", res)
		}
		seeded = append(seeded, res.Instances...)
	}
	if len(seeded) < 3 {
		t.Fatalf("%d running cluster instances, want the 3 seeded nodes", len(seeded))
	}
	i := seeded[0]
	if aws.ToString(i.InstanceId) == "" || aws.ToString(i.PrivateIpAddress) == "" ||
		aws.ToString(i.PrivateDnsName) == "" || i.Placement == nil || aws.ToString(i.Placement.AvailabilityZone) == "" ||
		i.State == nil || i.State.Name != types.InstanceStateNameRunning || aws.ToString(i.VpcId) == "" ||
		aws.ToString(i.SubnetId) == "" || i.InstanceType == "" {
		t.Errorf("instance lacks what the CCM reads: %+v", i)
	}
	if i.LaunchTime == nil || i.LaunchTime.IsZero() {
		t.Errorf("instance %s: no LaunchTime decoded", aws.ToString(i.InstanceId))
	}
	if len(i.NetworkInterfaces) == 0 || len(i.NetworkInterfaces[0].PrivateIpAddresses) == 0 {
		t.Errorf("instance %s: no network interfaces / private IPs", aws.ToString(i.InstanceId))
	}

	byID, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{aws.ToString(i.InstanceId)}})
	if err != nil {
		t.Fatalf("DescribeInstances InstanceIds: %v", err)
	}
	if n := countInstances(byID); n != 1 {
		t.Errorf("DescribeInstances by id: %d instances", n)
	}
	byDNS, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{filter("private-dns-name", aws.ToString(i.PrivateDnsName))},
	})
	if err != nil {
		t.Fatalf("DescribeInstances private-dns-name: %v", err)
	}
	if n := countInstances(byDNS); n != 1 {
		t.Errorf("DescribeInstances private-dns-name=%s: %d instances", aws.ToString(i.PrivateDnsName), n)
	}
	byName, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{filter("tag:Name", "node-*")},
	})
	if err != nil {
		t.Fatalf("DescribeInstances tag:Name=node-*: %v", err)
	}
	if n := countInstances(byName); n < 3 {
		t.Errorf("DescribeInstances tag:Name=node-*: %d instances", n)
	}
	_, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000dead"}})
	if code := errorCode(err); code != "InvalidInstanceID.NotFound" {
		t.Errorf("DescribeInstances of a missing id: %v (code %q), want InvalidInstanceID.NotFound", err, code)
	}
	_, err = c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{filter("no-such-filter", "x")}})
	if code := errorCode(err); code != "InvalidParameterValue" {
		t.Errorf("DescribeInstances with an unknown filter: %v (code %q), want InvalidParameterValue", err, code)
	}

	// Four more instances, then pages of five: two pages, every instance once.
	run, err := c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0123456789abcdef0"), MinCount: aws.Int32(4), MaxCount: aws.Int32(4),
		InstanceType: types.InstanceTypeT3Micro,
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeInstance,
			Tags:         []types.Tag{{Key: aws.String("judge"), Value: aws.String("paging")}},
		}},
	})
	if err != nil {
		t.Fatalf("RunInstances: %v", err)
	}
	var extra []string
	for _, i := range run.Instances {
		extra = append(extra, aws.ToString(i.InstanceId))
	}
	defer func() {
		if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: extra}); err != nil {
			t.Errorf("TerminateInstances: %v", err)
		}
	}()
	waiter := ec2.NewInstanceRunningWaiter(c.ec2, func(o *ec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := waiter.Wait(ctx, &ec2.DescribeInstancesInput{InstanceIds: extra}, 10*time.Second); err != nil {
		t.Fatalf("InstanceRunningWaiter: %v", err)
	}
	total, pages := 0, 0
	seen := map[string]bool{}
	p := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("DescribeInstances page %d: %v", pages+1, err)
		}
		pages++
		for _, res := range page.Reservations {
			for _, i := range res.Instances {
				id := aws.ToString(i.InstanceId)
				if seen[id] {
					t.Errorf("instance %s on two pages", id)
				}
				seen[id] = true
				total++
			}
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if total < 7 || pages < 2 {
		t.Errorf("MaxResults=5 paging: %d instances on %d pages, want >= 7 on >= 2", total, pages)
	}
}

func countInstances(out *ec2.DescribeInstancesOutput) int {
	n := 0
	for _, res := range out.Reservations {
		n += len(res.Instances)
	}
	return n
}

// DescribeAvailabilityZones (the zone-id label), by name too.
func TestEC2AvailabilityZones(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)
	out, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		t.Fatalf("DescribeAvailabilityZones: %v", err)
	}
	if len(out.AvailabilityZones) < 1 {
		t.Fatal("no availability zones")
	}
	for _, z := range out.AvailabilityZones {
		if !strings.HasPrefix(aws.ToString(z.ZoneName), r.Region) || aws.ToString(z.ZoneId) == "" ||
			aws.ToString(z.RegionName) != r.Region || z.State != types.AvailabilityZoneStateAvailable {
			t.Errorf("zone %+v", z)
		}
	}
	name := aws.ToString(out.AvailabilityZones[0].ZoneName)
	one, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{name}})
	if err != nil {
		t.Fatalf("DescribeAvailabilityZones ZoneNames: %v", err)
	}
	if len(one.AvailabilityZones) != 1 || aws.ToString(one.AvailabilityZones[0].ZoneName) != name {
		t.Errorf("DescribeAvailabilityZones ZoneNames=%s: %+v", name, one.AvailabilityZones)
	}
}

// A classic load balancer's security group: create in the cluster VPC, tag, authorize
// and revoke ingress, describe by id and by filter, delete, then InvalidGroup.NotFound.
func TestEC2SecurityGroups(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)

	vpcs, err := c.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	if err != nil || len(vpcs.Vpcs) == 0 {
		t.Fatalf("DescribeVpcs: %v (%d)", err, len(vpcs.Vpcs))
	}
	vpc := aws.ToString(vpcs.Vpcs[0].VpcId)
	name := fmt.Sprintf("k8s-elb-judge%d", time.Now().UnixNano())
	created, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(name), Description: aws.String("Security group for Kubernetes ELB judge"), VpcId: aws.String(vpc),
	})
	if err != nil {
		t.Fatalf("CreateSecurityGroup: %v", err)
	}
	id := aws.ToString(created.GroupId)
	if !strings.HasPrefix(id, "sg-") {
		t.Errorf("group id %q", id)
	}
	if _, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: []string{id},
		Tags:      []types.Tag{{Key: aws.String(clusterTag), Value: aws.String("owned")}},
	}); err != nil {
		t.Fatalf("CreateTags: %v", err)
	}
	perm := types.IpPermission{
		IpProtocol: aws.String("tcp"), FromPort: aws.Int32(8080), ToPort: aws.Int32(8080),
		IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}},
	}
	icmp := types.IpPermission{
		IpProtocol: aws.String("icmp"), FromPort: aws.Int32(3), ToPort: aws.Int32(4),
		IpRanges: []types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}},
	}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
		GroupId: aws.String(id), IpPermissions: []types.IpPermission{perm, icmp},
	}); err != nil {
		t.Fatalf("AuthorizeSecurityGroupIngress: %v", err)
	}
	_, err = c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{
		GroupId: aws.String(id), IpPermissions: []types.IpPermission{perm},
	})
	if code := errorCode(err); code != "InvalidPermission.Duplicate" {
		t.Errorf("authorizing the same rule again: %v (code %q), want InvalidPermission.Duplicate", err, code)
	}
	desc, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeSecurityGroups GroupIds: %v", err)
	}
	if len(desc.SecurityGroups) != 1 {
		t.Fatalf("DescribeSecurityGroups by id: %d groups", len(desc.SecurityGroups))
	}
	g := desc.SecurityGroups[0]
	if aws.ToString(g.GroupName) != name || aws.ToString(g.VpcId) != vpc || len(g.IpPermissions) != 2 || len(g.Tags) != 1 {
		t.Errorf("group %+v", g)
	}
	for _, p := range g.IpPermissions {
		if aws.ToString(p.IpProtocol) == "tcp" && (aws.ToInt32(p.FromPort) != 8080 || len(p.IpRanges) != 1) {
			t.Errorf("tcp permission %+v", p)
		}
	}
	byFilter, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{
		Filters: []types.Filter{filter("group-name", name), filter("vpc-id", vpc)},
	})
	if err != nil || len(byFilter.SecurityGroups) != 1 {
		t.Errorf("DescribeSecurityGroups group-name,vpc-id: %v (%d)", err, len(byFilter.SecurityGroups))
	}
	if _, err := c.ec2.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{
		GroupId: aws.String(id), IpPermissions: []types.IpPermission{perm, icmp},
	}); err != nil {
		t.Fatalf("RevokeSecurityGroupIngress: %v", err)
	}
	desc, err = c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil || len(desc.SecurityGroups) != 1 || len(desc.SecurityGroups[0].IpPermissions) != 0 {
		t.Errorf("after revoking: %v %+v", err, desc)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
		t.Fatalf("DeleteSecurityGroup: %v", err)
	}
	_, err = c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if code := errorCode(err); code != "InvalidGroup.NotFound" {
		t.Errorf("describing the deleted group: %v (code %q), want InvalidGroup.NotFound", err, code)
	}
}

// CreateTags on an instance (the CCM tags what it owns), DescribeTags by resource.
func TestEC2CreateTags(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{filter("tag:Name", "node-0")}})
	if err != nil || countInstances(out) != 1 {
		t.Fatalf("DescribeInstances tag:Name=node-0: %v", err)
	}
	id := aws.ToString(out.Reservations[0].Instances[0].InstanceId)
	if _, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: []string{id},
		Tags:      []types.Tag{{Key: aws.String("judge/tagged"), Value: aws.String("yes")}, {Key: aws.String("judge/empty"), Value: aws.String("")}},
	}); err != nil {
		t.Fatalf("CreateTags: %v", err)
	}
	tags, err := c.ec2.DescribeTags(ctx, &ec2.DescribeTagsInput{
		Filters: []types.Filter{filter("resource-id", id), filter("key", "judge/*")},
	})
	if err != nil {
		t.Fatalf("DescribeTags: %v", err)
	}
	if len(tags.Tags) != 2 {
		t.Errorf("DescribeTags: %+v", tags.Tags)
	}
	for _, tag := range tags.Tags {
		if aws.ToString(tag.ResourceId) != id || tag.ResourceType != types.ResourceTypeInstance {
			t.Errorf("tag %+v", tag)
		}
	}
	if _, err := c.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{
		Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("judge/tagged")}, {Key: aws.String("judge/empty")}},
	}); err != nil {
		t.Fatalf("DeleteTags: %v", err)
	}
	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: []string{"i-0000000000000dead"}, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}},
	})
	if code := errorCode(err); code != "InvalidInstanceID.NotFound" {
		t.Errorf("CreateTags on a missing instance: %v (code %q)", err, code)
	}
}
