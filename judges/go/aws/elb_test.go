package judge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"ccm-conformance.invalid/judges/judgekit"
)

// network is what a Service's load balancer is built from: the cluster VPC, one subnet
// per zone, and the node instances.
type network struct {
	vpc       string
	subnets   []string
	instances []string
}

func clusterNetwork(t *testing.T, ctx context.Context, c clients) network {
	t.Helper()
	subnets, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{
		Filters: []ec2types.Filter{filter("tag-key", clusterTag)},
	})
	if err != nil {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	if len(subnets.Subnets) == 0 {
		t.Fatal("no subnet carries the cluster tag")
	}
	n := network{vpc: aws.ToString(subnets.Subnets[0].VpcId)}
	for _, s := range subnets.Subnets {
		n.subnets = append(n.subnets, aws.ToString(s.SubnetId))
	}
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{filter("tag:Name", "node-*"), filter("instance-state-name", "running")},
	})
	if err != nil {
		t.Fatalf("DescribeInstances: %v", err)
	}
	for _, res := range out.Reservations {
		for _, i := range res.Instances {
			n.instances = append(n.instances, aws.ToString(i.InstanceId))
		}
	}
	if len(n.instances) < 3 {
		t.Fatalf("%d node instances", len(n.instances))
	}
	return n
}

// A classic ELB the way the CCM builds one: security group, load balancer with
// listeners in the cluster subnets, health check, instances, attributes, tags; then
// deregister, delete and LoadBalancerNotFound.
func TestELBClassic(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)
	n := clusterNetwork(t, ctx, c)
	name := fmt.Sprintf("a%d", time.Now().UnixNano())

	sg, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("k8s-elb-" + name), Description: aws.String("judge"), VpcId: aws.String(n.vpc),
	})
	if err != nil {
		t.Fatalf("CreateSecurityGroup: %v", err)
	}
	defer func() {
		if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: sg.GroupId}); err != nil {
			t.Errorf("DeleteSecurityGroup: %v", err)
		}
	}()

	created, err := c.elb.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{
		LoadBalancerName: aws.String(name),
		Listeners: []elbtypes.Listener{{
			Protocol: aws.String("TCP"), LoadBalancerPort: 18090, InstanceProtocol: aws.String("TCP"), InstancePort: aws.Int32(30090),
		}},
		Subnets:        n.subnets,
		SecurityGroups: []string{aws.ToString(sg.GroupId)},
		Tags: []elbtypes.Tag{
			{Key: aws.String(clusterTag), Value: aws.String("owned")},
			{Key: aws.String("kubernetes.io/service-name"), Value: aws.String("default/judge")},
		},
	})
	if err != nil {
		t.Fatalf("elb.CreateLoadBalancer: %v", err)
	}
	if aws.ToString(created.DNSName) == "" {
		t.Errorf("CreateLoadBalancer returned no DNSName")
	}
	deleted := false
	defer func() {
		if !deleted {
			_, _ = c.elb.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String(name)})
		}
	}()

	if _, err := c.elb.ConfigureHealthCheck(ctx, &elb.ConfigureHealthCheckInput{
		LoadBalancerName: aws.String(name),
		HealthCheck: &elbtypes.HealthCheck{
			Target: aws.String("TCP:30090"), Interval: aws.Int32(10), Timeout: aws.Int32(5),
			HealthyThreshold: aws.Int32(2), UnhealthyThreshold: aws.Int32(6),
		},
	}); err != nil {
		t.Fatalf("ConfigureHealthCheck: %v", err)
	}
	var instances []elbtypes.Instance
	for _, id := range n.instances {
		instances = append(instances, elbtypes.Instance{InstanceId: aws.String(id)})
	}
	reg, err := c.elb.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{
		LoadBalancerName: aws.String(name), Instances: instances,
	})
	if err != nil {
		t.Fatalf("RegisterInstancesWithLoadBalancer: %v", err)
	}
	if len(reg.Instances) != len(instances) {
		t.Errorf("after registering: %d instances", len(reg.Instances))
	}
	if _, err := c.elb.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{
		LoadBalancerName: aws.String(name),
		LoadBalancerAttributes: &elbtypes.LoadBalancerAttributes{
			ConnectionDraining:     &elbtypes.ConnectionDraining{Enabled: true, Timeout: aws.Int32(300)},
			ConnectionSettings:     &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(120)},
			CrossZoneLoadBalancing: &elbtypes.CrossZoneLoadBalancing{Enabled: true},
		},
	}); err != nil {
		t.Fatalf("ModifyLoadBalancerAttributes: %v", err)
	}
	attrs, err := c.elb.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeLoadBalancerAttributes: %v", err)
	}
	a := attrs.LoadBalancerAttributes
	if a == nil || a.ConnectionSettings == nil || aws.ToInt32(a.ConnectionSettings.IdleTimeout) != 120 ||
		a.CrossZoneLoadBalancing == nil || !a.CrossZoneLoadBalancing.Enabled ||
		a.ConnectionDraining == nil || !a.ConnectionDraining.Enabled {
		t.Errorf("attributes after modify: %+v", a)
	}

	desc, err := c.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
	if err != nil {
		t.Fatalf("elb.DescribeLoadBalancers: %v", err)
	}
	if len(desc.LoadBalancerDescriptions) != 1 {
		t.Fatalf("DescribeLoadBalancers: %d descriptions", len(desc.LoadBalancerDescriptions))
	}
	lb := desc.LoadBalancerDescriptions[0]
	if aws.ToString(lb.DNSName) != aws.ToString(created.DNSName) || aws.ToString(lb.VPCId) != n.vpc ||
		len(lb.ListenerDescriptions) != 1 || len(lb.Instances) != len(instances) ||
		lb.HealthCheck == nil || aws.ToString(lb.HealthCheck.Target) != "TCP:30090" ||
		len(lb.Subnets) != len(n.subnets) || len(lb.SecurityGroups) != 1 || aws.ToString(lb.Scheme) != "internet-facing" {
		t.Errorf("description %+v", lb)
	}
	if lb.CreatedTime == nil || lb.CreatedTime.IsZero() {
		t.Errorf("no CreatedTime decoded")
	}
	if l := lb.ListenerDescriptions[0].Listener; l == nil || l.LoadBalancerPort != 18090 || aws.ToInt32(l.InstancePort) != 30090 {
		t.Errorf("listener %+v", l)
	}
	tags, err := c.elb.DescribeTags(ctx, &elb.DescribeTagsInput{LoadBalancerNames: []string{name}})
	if err != nil || len(tags.TagDescriptions) != 1 || len(tags.TagDescriptions[0].Tags) != 2 {
		t.Errorf("elb.DescribeTags: %v %+v", err, tags)
	}
	health, err := c.elb.DescribeInstanceHealth(ctx, &elb.DescribeInstanceHealthInput{LoadBalancerName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeInstanceHealth: %v", err)
	}
	if len(health.InstanceStates) != len(instances) {
		t.Errorf("DescribeInstanceHealth: %d states", len(health.InstanceStates))
	}
	for _, s := range health.InstanceStates {
		if aws.ToString(s.State) == "" || aws.ToString(s.InstanceId) == "" {
			t.Errorf("instance state %+v", s)
		}
	}

	dereg, err := c.elb.DeregisterInstancesFromLoadBalancer(ctx, &elb.DeregisterInstancesFromLoadBalancerInput{
		LoadBalancerName: aws.String(name), Instances: instances[:1],
	})
	if err != nil {
		t.Fatalf("DeregisterInstancesFromLoadBalancer: %v", err)
	}
	if len(dereg.Instances) != len(instances)-1 {
		t.Errorf("after deregistering one: %d instances", len(dereg.Instances))
	}
	if _, err := c.elb.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String(name)}); err != nil {
		t.Fatalf("elb.DeleteLoadBalancer: %v", err)
	}
	deleted = true
	_, err = c.elb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{name}})
	var notFound *elbtypes.AccessPointNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("describing the deleted load balancer: %v (code %q), want LoadBalancerNotFound", err, errorCode(err))
	}
}

// An NLB the way the CCM builds one: load balancer (waited on with the SDK's
// LoadBalancerAvailable waiter), target group, targets, listener, attributes; then
// listener, load balancer (LoadBalancersDeleted waiter) and target group deleted.
func TestELBv2NetworkLoadBalancer(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := newClients(t, ctx, r)
	n := clusterNetwork(t, ctx, c)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	name := "k8s-judge-nlb-" + suffix

	created, err := c.elbv2.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
		Name:    aws.String(name),
		Type:    elbv2types.LoadBalancerTypeEnumNetwork,
		Scheme:  elbv2types.LoadBalancerSchemeEnumInternetFacing,
		Subnets: n.subnets,
		Tags:    []elbv2types.Tag{{Key: aws.String(clusterTag), Value: aws.String("owned")}},
	})
	if err != nil {
		t.Fatalf("elbv2.CreateLoadBalancer: %v", err)
	}
	if len(created.LoadBalancers) != 1 {
		t.Fatalf("CreateLoadBalancer returned %d load balancers", len(created.LoadBalancers))
	}
	lb := created.LoadBalancers[0]
	arn := aws.ToString(lb.LoadBalancerArn)
	if arn == "" || aws.ToString(lb.DNSName) == "" || lb.Type != elbv2types.LoadBalancerTypeEnumNetwork ||
		lb.State == nil || lb.CreatedTime == nil || aws.ToString(lb.VpcId) != n.vpc || len(lb.AvailabilityZones) != len(n.subnets) {
		t.Errorf("created NLB %+v", lb)
	}
	lbDeleted := false
	defer func() {
		if !lbDeleted {
			_, _ = c.elbv2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)})
		}
	}()
	available := elbv2.NewLoadBalancerAvailableWaiter(c.elbv2, func(o *elbv2.LoadBalancerAvailableWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := available.Wait(ctx, &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{arn}}, 10*time.Second); err != nil {
		t.Fatalf("LoadBalancerAvailable waiter: %v", err)
	}

	tg, err := c.elbv2.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
		Name: aws.String("k8s-judge-tg-" + suffix), Protocol: elbv2types.ProtocolEnumTcp, Port: aws.Int32(30091),
		VpcId: aws.String(n.vpc), TargetType: elbv2types.TargetTypeEnumInstance,
		HealthCheckProtocol: elbv2types.ProtocolEnumTcp, HealthCheckPort: aws.String("traffic-port"),
		HealthCheckIntervalSeconds: aws.Int32(10), HealthCheckTimeoutSeconds: aws.Int32(10),
		HealthyThresholdCount: aws.Int32(2), UnhealthyThresholdCount: aws.Int32(2),
		Tags: []elbv2types.Tag{{Key: aws.String(clusterTag), Value: aws.String("owned")}},
	})
	if err != nil {
		t.Fatalf("CreateTargetGroup: %v", err)
	}
	tgArn := aws.ToString(tg.TargetGroups[0].TargetGroupArn)
	defer func() {
		if _, err := c.elbv2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: aws.String(tgArn)}); err != nil {
			t.Errorf("DeleteTargetGroup: %v", err)
		}
	}()
	var targets []elbv2types.TargetDescription
	for _, id := range n.instances {
		targets = append(targets, elbv2types.TargetDescription{Id: aws.String(id), Port: aws.Int32(30091)})
	}
	if _, err := c.elbv2.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: aws.String(tgArn), Targets: targets}); err != nil {
		t.Fatalf("RegisterTargets: %v", err)
	}
	listener, err := c.elbv2.CreateListener(ctx, &elbv2.CreateListenerInput{
		LoadBalancerArn: aws.String(arn), Protocol: elbv2types.ProtocolEnumTcp, Port: aws.Int32(18091),
		DefaultActions: []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: aws.String(tgArn)}},
	})
	if err != nil {
		t.Fatalf("CreateListener: %v", err)
	}
	listenerArn := aws.ToString(listener.Listeners[0].ListenerArn)

	ls, err := c.elbv2.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("DescribeListeners: %v", err)
	}
	if len(ls.Listeners) != 1 || aws.ToInt32(ls.Listeners[0].Port) != 18091 || len(ls.Listeners[0].DefaultActions) != 1 ||
		aws.ToString(ls.Listeners[0].DefaultActions[0].TargetGroupArn) != tgArn {
		t.Errorf("listeners %+v", ls.Listeners)
	}
	tgs, err := c.elbv2.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("DescribeTargetGroups: %v", err)
	}
	if len(tgs.TargetGroups) != 1 || aws.ToString(tgs.TargetGroups[0].TargetGroupArn) != tgArn ||
		len(tgs.TargetGroups[0].LoadBalancerArns) != 1 || aws.ToInt32(tgs.TargetGroups[0].Port) != 30091 {
		t.Errorf("target groups %+v", tgs.TargetGroups)
	}
	health, err := c.elbv2.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(tgArn)})
	if err != nil {
		t.Fatalf("DescribeTargetHealth: %v", err)
	}
	if len(health.TargetHealthDescriptions) != len(targets) {
		t.Errorf("DescribeTargetHealth: %d descriptions", len(health.TargetHealthDescriptions))
	}
	for _, h := range health.TargetHealthDescriptions {
		if h.Target == nil || h.TargetHealth == nil || h.TargetHealth.State == "" {
			t.Errorf("target health %+v", h)
		}
	}
	if _, err := c.elbv2.ModifyTargetGroupAttributes(ctx, &elbv2.ModifyTargetGroupAttributesInput{
		TargetGroupArn: aws.String(tgArn),
		Attributes:     []elbv2types.TargetGroupAttribute{{Key: aws.String("proxy_protocol_v2.enabled"), Value: aws.String("false")}},
	}); err != nil {
		t.Fatalf("ModifyTargetGroupAttributes: %v", err)
	}
	if _, err := c.elbv2.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{
		LoadBalancerArn: aws.String(arn),
		Attributes:      []elbv2types.LoadBalancerAttribute{{Key: aws.String("load_balancing.cross_zone.enabled"), Value: aws.String("true")}},
	}); err != nil {
		t.Fatalf("elbv2.ModifyLoadBalancerAttributes: %v", err)
	}
	attrs, err := c.elbv2.DescribeLoadBalancerAttributes(ctx, &elbv2.DescribeLoadBalancerAttributesInput{LoadBalancerArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("elbv2.DescribeLoadBalancerAttributes: %v", err)
	}
	crossZone := ""
	for _, a := range attrs.Attributes {
		if aws.ToString(a.Key) == "load_balancing.cross_zone.enabled" {
			crossZone = aws.ToString(a.Value)
		}
	}
	if crossZone != "true" {
		t.Errorf("cross-zone attribute %q after modify", crossZone)
	}
	tags, err := c.elbv2.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil || len(tags.TagDescriptions) != 1 || len(tags.TagDescriptions[0].Tags) != 1 {
		t.Errorf("elbv2.DescribeTags: %v %+v", err, tags)
	}
	byName, err := c.elbv2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	if err != nil || len(byName.LoadBalancers) != 1 || aws.ToString(byName.LoadBalancers[0].LoadBalancerArn) != arn {
		t.Errorf("DescribeLoadBalancers Names=%s: %v", name, err)
	}

	if _, err := c.elbv2.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: aws.String(tgArn), Targets: targets[:1]}); err != nil {
		t.Fatalf("DeregisterTargets: %v", err)
	}
	if _, err := c.elbv2.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: aws.String(listenerArn)}); err != nil {
		t.Fatalf("DeleteListener: %v", err)
	}
	if _, err := c.elbv2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil {
		t.Fatalf("elbv2.DeleteLoadBalancer: %v", err)
	}
	lbDeleted = true
	gone := elbv2.NewLoadBalancersDeletedWaiter(c.elbv2, func(o *elbv2.LoadBalancersDeletedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := gone.Wait(ctx, &elbv2.DescribeLoadBalancersInput{LoadBalancerArns: []string{arn}}, 10*time.Second); err != nil {
		t.Fatalf("LoadBalancersDeleted waiter: %v", err)
	}
	_, err = c.elbv2.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	var notFound *elbv2types.LoadBalancerNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("describing the deleted NLB: %v (code %q), want LoadBalancerNotFound", err, errorCode(err))
	}
}
