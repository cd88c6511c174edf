package judge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/filter"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"ccm-conformance.invalid/judges/judgekit"
)

func last(link string) string {
	return link[strings.LastIndex(link, "/")+1:]
}

// TestInstances: the reads of providers/gce/gce_instances.go and gce_zones.go through
// k8s-cloud-provider (v1, beta and alpha), a filtered list, a paged list through the
// generated client, and the 404 that tells the node controller an instance is gone.
func TestInstances(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	seq := lastSeq(t, g.r)
	key := meta.ZonalKey("node-0", g.r.Zone)
	vm, err := g.c.Instances().Get(ctx, key)
	if err != nil {
		t.Fatalf("Instances().Get: %v", err)
	}
	if vm.Name != "node-0" || vm.Status != "RUNNING" || vm.Id == 0 || last(vm.Zone) != g.r.Zone {
		t.Errorf("instance %s %s %d %s", vm.Name, vm.Status, vm.Id, vm.Zone)
	}
	if last(vm.MachineType) != "e2-standard-2" {
		t.Errorf("machineType %q", vm.MachineType)
	}
	if vm.Tags == nil || !slices.Equal(vm.Tags.Items, []string{"ccm-node"}) {
		t.Errorf("tags %+v", vm.Tags)
	}
	if len(vm.NetworkInterfaces) == 0 {
		t.Fatal("no network interfaces")
	}
	nic := vm.NetworkInterfaces[0]
	if !strings.HasPrefix(nic.NetworkIP, "127.70.") {
		t.Errorf("networkIP %q", nic.NetworkIP)
	}
	if len(nic.AccessConfigs) == 0 || !strings.HasPrefix(nic.AccessConfigs[0].NatIP, "127.72.") {
		t.Errorf("accessConfigs %+v", nic.AccessConfigs)
	}
	if nic.Network != g.networkURL() {
		t.Errorf("network %q, want %q", nic.Network, g.networkURL())
	}
	// The same instance through the beta and alpha services (BasePath v1 -> beta/alpha).
	bvm, err := g.c.BetaInstances().Get(ctx, key)
	if err != nil || bvm.Name != "node-0" {
		t.Errorf("BetaInstances().Get: %v", err)
	}
	avm, err := g.c.AlphaInstances().Get(ctx, key)
	if err != nil || avm.Name != "node-0" {
		t.Errorf("AlphaInstances().Get: %v", err)
	}

	// gce_instances.go getInstancesByNames: a filtered list.
	list, err := g.c.Instances().List(ctx, g.r.Zone, filter.Regexp("name", "node-.*"))
	if err != nil {
		t.Fatalf("Instances().List: %v", err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if !slices.Equal(names, []string{"node-0", "node-1", "node-2"}) {
		t.Errorf("filtered list %v", names)
	}
	none, err := g.c.Instances().List(ctx, g.r.Zone, filter.Regexp("name", "node-9.*"))
	if err != nil || len(none) != 0 {
		t.Errorf("empty filtered list: %d, %v", len(none), err)
	}
	// One a page through the generated client: Pages follows nextPageToken.
	pages := 0
	names = nil
	err = g.ga.Instances.List(g.r.ProjectID, g.r.Zone).MaxResults(1).Pages(ctx, func(l *compute.InstanceList) error {
		pages++
		for _, i := range l.Items {
			names = append(names, i.Name)
		}
		return nil
	})
	if err != nil || pages != 3 || len(names) != 3 {
		t.Errorf("paged list: %d pages %v, %v", pages, names, err)
	}
	// Aggregated, as gce_instances.go does for nodes in unknown zones.
	agg, err := g.ga.Instances.AggregatedList(g.r.ProjectID).Filter("name eq node-1").Context(ctx).Do()
	if err != nil {
		t.Fatalf("AggregatedList: %v", err)
	}
	found := 0
	for scope, l := range agg.Items {
		for _, i := range l.Instances {
			found++
			if i.Name != "node-1" || scope != "zones/"+g.r.Zone {
				t.Errorf("aggregated %s: %s", scope, i.Name)
			}
		}
	}
	if found != 1 {
		t.Errorf("aggregated list found %d", found)
	}

	// A missing instance: isNotFound, reason notFound.
	_, err = g.c.Instances().Get(ctx, meta.ZonalKey("judge-missing", g.r.Zone))
	if !isNotFound(err) || reason(err) != "notFound" {
		t.Errorf("missing instance: %T %v (reason %q)", err, err, reason(err))
	}

	// gce.go refreshManagedZones: the region's zones by a filter on the region link.
	regionLink := projectsBasePath(g.r.Endpoint) + strings.Join([]string{g.r.ProjectID, "regions", g.r.Region}, "/")
	zones, err := g.c.Zones().List(ctx, filter.Regexp("region", regionLink))
	if err != nil {
		t.Fatalf("Zones().List: %v", err)
	}
	var zoneNames []string
	for _, z := range zones {
		zoneNames = append(zoneNames, z.Name)
	}
	slices.Sort(zoneNames)
	if len(zoneNames) == 0 || !slices.Contains(zoneNames, g.r.Zone) {
		t.Errorf("zones of %s: %v", regionLink, zoneNames)
	}
	region, err := g.c.Regions().Get(ctx, meta.GlobalKey(g.r.Region))
	if err != nil || region.Name != g.r.Region {
		t.Errorf("Regions().Get: %v", err)
	}

	// The beta and alpha calls went to their own paths.
	var beta, alpha bool
	for _, e := range journalSince(t, g.r, seq) {
		beta = beta || strings.HasPrefix(e.Path, "/compute/beta/projects/")
		alpha = alpha || strings.HasPrefix(e.Path, "/compute/alpha/projects/")
	}
	if !beta || !alpha {
		t.Errorf("beta path seen %v, alpha path seen %v", beta, alpha)
	}
}

// TestThrottled: GCE's 429 rateLimitExceeded reaches the caller as a googleapi.Error
// (neither k8s-cloud-provider nor the generated client retries a plain call), and the
// next call goes through.
func TestThrottled(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	rule := map[string]any{
		"service": "compute", "operation": "compute.instances.get", "resource": "node-2",
		"kind": "throttle", "count": 1,
	}
	if err := admin(g.r, "POST", "/faults", rule, nil); err != nil {
		t.Fatal(err)
	}
	key := meta.ZonalKey("node-2", g.r.Zone)
	_, err := g.c.Instances().Get(ctx, key)
	if !isHTTPErrorCode(err, http.StatusTooManyRequests) || reason(err) != "rateLimitExceeded" {
		t.Fatalf("throttled Get: %T %v (reason %q)", err, err, reason(err))
	}
	if vm, err := g.c.Instances().Get(ctx, key); err != nil || vm.Name != "node-2" {
		t.Fatalf("Get after the throttle: %v", err)
	}
}

// TestAddresses: gce_addresses.go ReserveRegionAddress, GetRegionAddress,
// GetRegionAddressByIP and DeleteRegionAddress, each write waited on.
func TestAddresses(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	seq := lastSeq(t, g.r)
	key := meta.RegionalKey("judge-addr", g.r.Region)
	addr := &compute.Address{
		Name:        key.Name,
		Description: `{"kubernetes.io/service-name":"default/judge"}`,
		NetworkTier: "PREMIUM",
	}
	if err := g.c.Addresses().Insert(ctx, key, addr); err != nil {
		t.Fatalf("Addresses().Insert: %v", err)
	}
	got, err := g.c.Addresses().Get(ctx, key)
	if err != nil {
		t.Fatalf("Addresses().Get: %v", err)
	}
	if got.Status != "RESERVED" || !strings.HasPrefix(got.Address, "127.71.") || got.AddressType != "EXTERNAL" ||
		got.NetworkTier != "PREMIUM" || got.Description != addr.Description || last(got.Region) != g.r.Region {
		t.Errorf("address %+v", got)
	}
	byIP, err := g.c.Addresses().List(ctx, g.r.Region, filter.Regexp("address", got.Address))
	if err != nil || len(byIP) != 1 || byIP[0].Name != key.Name {
		t.Errorf("List by IP %s: %d, %v", got.Address, len(byIP), err)
	}
	// The same name again: 409, which ensureStaticIP takes for "already there".
	err = g.c.Addresses().Insert(ctx, key, &compute.Address{Name: key.Name})
	if !isHTTPErrorCode(err, http.StatusConflict) || reason(err) != "alreadyExists" {
		t.Errorf("duplicate insert: %T %v (reason %q)", err, err, reason(err))
	}
	if err := g.c.Addresses().Delete(ctx, key); err != nil {
		t.Fatalf("Addresses().Delete: %v", err)
	}
	if _, err := g.c.Addresses().Get(ctx, key); !isNotFound(err) {
		t.Errorf("Get after delete: %v", err)
	}
	if err := g.c.Addresses().Delete(ctx, key); !isNotFound(err) {
		t.Errorf("Delete again: %v", err)
	}
	// Inserts and deletes were waited on, with wait.
	waits := 0
	for _, e := range journalSince(t, g.r, seq) {
		if e.Operation == "compute.regionOperations.wait" && e.Method == "POST" && e.Status == 200 {
			waits++
		}
		if e.Operation == "compute.regionOperations.get" {
			t.Errorf("k8s-cloud-provider polled with get: %s", e.Path)
		}
	}
	if waits < 2 {
		t.Errorf("%d operation waits, want at least 2", waits)
	}
}

// TestFailedOperation: an operation that ends in ERROR is the write's error, a
// googleapi.Error with the operation's httpErrorStatusCode (k8s-cloud-provider op.go),
// and leaves nothing behind.
func TestFailedOperation(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	setLifecycle(t, g.r, "resource", "judge-broken", map[string]any{"mode": "error"})
	key := meta.RegionalKey("judge-broken", g.r.Region)
	err := g.c.Addresses().Insert(ctx, key, &compute.Address{Name: key.Name})
	if err == nil {
		t.Fatal("an operation in ERROR was a success")
	}
	if !isHTTPErrorCode(err, http.StatusInternalServerError) {
		t.Errorf("failed operation: %T %v, want a googleapi.Error with code 500", err, err)
	}
	if _, err := g.c.Addresses().Get(ctx, key); !isNotFound(err) {
		t.Errorf("Get after the failed insert: %v", err)
	}
}

// TestExternalLoadBalancer: the writes of gce_loadbalancer_external.go for one Service,
// with its bodies: the node health check, a static IP, a target pool with two nodes (one
// added later, as updateTargetPool does), the firewall, the forwarding rule on the IP;
// the IP released while the rule holds it, the pool and health check refused while in
// use (isInUsedByError); then the teardown.
func TestExternalLoadBalancer(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	name := "ajudgeexternallb"
	region := g.r.Region
	desc := `{"kubernetes.io/service-name":"default/judge"}`
	hcKey := meta.GlobalKey("k8s-judge-node")
	hc := &compute.HttpHealthCheck{
		Name: hcKey.Name, Port: 10256, RequestPath: "/healthz",
		Description:      `{"kubernetes.io/service-name":"k8s-judge-node"}`,
		CheckIntervalSec: 8, TimeoutSec: 1, HealthyThreshold: 1, UnhealthyThreshold: 3,
	}
	if err := g.c.HttpHealthChecks().Insert(ctx, hcKey, hc); err != nil {
		t.Fatalf("HttpHealthChecks().Insert: %v", err)
	}
	hcGot, err := g.c.HttpHealthChecks().Get(ctx, hcKey)
	if err != nil || hcGot.Port != 10256 || hcGot.RequestPath != "/healthz" || hcGot.CheckIntervalSec != 8 {
		t.Fatalf("HttpHealthChecks().Get: %+v, %v", hcGot, err)
	}

	ipKey := meta.RegionalKey(name, region)
	if err := g.c.Addresses().Insert(ctx, ipKey, &compute.Address{Name: name, Description: desc, NetworkTier: "PREMIUM"}); err != nil {
		t.Fatalf("Addresses().Insert: %v", err)
	}
	ip, err := g.c.Addresses().Get(ctx, ipKey)
	if err != nil {
		t.Fatalf("Addresses().Get: %v", err)
	}

	hostPath := func(node string) string { return fmt.Sprintf("/zones/%s/instances/%s", g.r.Zone, node) }
	poolKey := meta.RegionalKey(name, region)
	pool := &compute.TargetPool{
		Name: name, Description: desc, Instances: []string{hostPath("node-0")},
		SessionAffinity: "NONE", HealthChecks: []string{hcGot.SelfLink},
	}
	if err := g.c.TargetPools().Insert(ctx, poolKey, pool); err != nil {
		t.Fatalf("TargetPools().Insert: %v", err)
	}
	add := &compute.TargetPoolsAddInstanceRequest{Instances: []*compute.InstanceReference{{Instance: hostPath("node-1")}}}
	if err := g.c.TargetPools().AddInstance(ctx, poolKey, add); err != nil {
		t.Fatalf("TargetPools().AddInstance: %v", err)
	}
	got, err := g.c.TargetPools().Get(ctx, poolKey)
	if err != nil {
		t.Fatalf("TargetPools().Get: %v", err)
	}
	var members []string
	for _, i := range got.Instances {
		// gce_loadbalancer_external.go hostURLToComparablePath
		if idx := strings.Index(i, "/zones/"); idx >= 0 {
			members = append(members, i[idx:])
		}
	}
	slices.Sort(members)
	if !slices.Equal(members, []string{hostPath("node-0"), hostPath("node-1")}) {
		t.Errorf("pool members %v", got.Instances)
	}
	if len(got.HealthChecks) != 1 || last(got.HealthChecks[0]) != hcKey.Name || got.SessionAffinity != "NONE" {
		t.Errorf("pool %+v", got)
	}

	fwKey := meta.GlobalKey("k8s-fw-" + name)
	fw := &compute.Firewall{
		Name: fwKey.Name, Description: desc, Network: g.networkURL(),
		SourceRanges: []string{"0.0.0.0/0"}, TargetTags: []string{"ccm-node"},
		Allowed:           []*compute.FirewallAllowed{{IPProtocol: "tcp", Ports: []string{"18083"}}},
		DestinationRanges: []string{ip.Address}, Priority: 1000,
	}
	if err := g.c.Firewalls().Insert(ctx, fwKey, fw); err != nil {
		t.Fatalf("Firewalls().Insert: %v", err)
	}
	fwGot, err := g.c.Firewalls().Get(ctx, fwKey)
	if err != nil || len(fwGot.Allowed) != 1 || !slices.Equal(fwGot.Allowed[0].Ports, []string{"18083"}) || fwGot.Network != g.networkURL() {
		t.Errorf("Firewalls().Get: %+v, %v", fwGot, err)
	}

	// gce_loadbalancer_external.go targetPoolURL
	poolURL := projectsBasePath(g.r.Endpoint) + strings.Join([]string{g.r.ProjectID, "regions", region, "targetPools", name}, "/")
	ruleKey := meta.RegionalKey(name, region)
	rule := &compute.ForwardingRule{
		Name: name, Description: desc, IPAddress: ip.Address, IPProtocol: "TCP",
		PortRange: "18083-18083", Target: poolURL, NetworkTier: "PREMIUM",
	}
	if err := g.c.ForwardingRules().Insert(ctx, ruleKey, rule); err != nil {
		t.Fatalf("ForwardingRules().Insert: %v", err)
	}
	fr, err := g.c.ForwardingRules().Get(ctx, ruleKey)
	if err != nil {
		t.Fatalf("ForwardingRules().Get: %v", err)
	}
	if fr.IPAddress != ip.Address || fr.IPProtocol != "TCP" || fr.PortRange != "18083-18083" ||
		last(fr.Target) != name || fr.NetworkTier != "PREMIUM" || fr.Description != desc {
		t.Errorf("forwarding rule %+v", fr)
	}
	// The beta view of the same rule (gce_loadbalancer_external.go reads it for the
	// network tier).
	if bfr, err := g.c.BetaForwardingRules().Get(ctx, ruleKey); err != nil || bfr.IPAddress != ip.Address {
		t.Errorf("BetaForwardingRules().Get: %v", err)
	}
	if held, err := g.c.Addresses().Get(ctx, ipKey); err != nil || held.Status != "IN_USE" {
		t.Errorf("address while the rule holds it: %+v, %v", held, err)
	}
	// ensureExternalLoadBalancer releases the IP it reserved once the rule holds it
	// (isSafeToReleaseIP): GCE lets it go, and the rule keeps the address.
	if err := g.c.Addresses().Delete(ctx, ipKey); err != nil {
		t.Errorf("releasing the address the rule holds: %v", err)
	}
	if fr, err := g.c.ForwardingRules().Get(ctx, ruleKey); err != nil || fr.IPAddress != ip.Address {
		t.Errorf("rule after the address was released: %+v, %v", fr, err)
	}
	// gce_util.go isInUsedByError: the pool the rule targets, and the health check the
	// pool uses, cannot go first (400 whose message says "being used by").
	if err := g.c.TargetPools().Delete(ctx, poolKey); !isInUsedByError(err) {
		t.Errorf("deleting a target pool in use: %T %v, want 400 '... being used by ...'", err, err)
	}
	if err := g.c.HttpHealthChecks().Delete(ctx, hcKey); !isInUsedByError(err) {
		t.Errorf("deleting a health check in use: %T %v, want 400 '... being used by ...'", err, err)
	}

	// Teardown in upstream's order (ensureExternalLoadBalancerDeleted).
	if err := g.c.ForwardingRules().Delete(ctx, ruleKey); err != nil {
		t.Errorf("ForwardingRules().Delete: %v", err)
	}
	if err := g.c.Firewalls().Delete(ctx, fwKey); err != nil {
		t.Errorf("Firewalls().Delete: %v", err)
	}
	remove := &compute.TargetPoolsRemoveInstanceRequest{Instances: []*compute.InstanceReference{{Instance: hostPath("node-1")}}}
	if err := g.c.TargetPools().RemoveInstance(ctx, poolKey, remove); err != nil {
		t.Errorf("TargetPools().RemoveInstance: %v", err)
	}
	if p, err := g.c.TargetPools().Get(ctx, poolKey); err != nil || len(p.Instances) != 1 {
		t.Errorf("pool after RemoveInstance: %v, %v", p, err)
	}
	if err := g.c.TargetPools().Delete(ctx, poolKey); err != nil {
		t.Errorf("TargetPools().Delete: %v", err)
	}
	if err := g.c.HttpHealthChecks().Delete(ctx, hcKey); err != nil {
		t.Errorf("HttpHealthChecks().Delete: %v", err)
	}
	for what, err := range map[string]error{
		"rule":     func() error { _, err := g.c.ForwardingRules().Get(ctx, ruleKey); return err }(),
		"pool":     func() error { _, err := g.c.TargetPools().Get(ctx, poolKey); return err }(),
		"firewall": func() error { _, err := g.c.Firewalls().Get(ctx, fwKey); return err }(),
		"hc":       func() error { _, err := g.c.HttpHealthChecks().Get(ctx, hcKey); return err }(),
		"address":  func() error { _, err := g.c.Addresses().Get(ctx, ipKey); return err }(),
	} {
		if !isNotFound(err) {
			t.Errorf("%s after delete: %v", what, err)
		}
	}
}

// isInUsedByError is providers/gce/gce_util.go's.
func isInUsedByError(err error) bool {
	apiErr, ok := err.(*googleapi.Error)
	if !ok || apiErr.Code != http.StatusBadRequest {
		return false
	}
	return strings.Contains(apiErr.Message, "being used by")
}

// TestRoutes: gce_routes.go CreateRoute, ListRoutes (its three-part filter) and
// DeleteRoute, with the first route's operations answering PENDING for two looks so
// that k8s-cloud-provider's wait loop really loops (every loop waits at least upstream's
// operationPollInterval, so the other routes' operations are left immediate).
func TestRoutes(t *testing.T) {
	t.Parallel()
	g := newGCE(t)
	ctx := judgekit.Context(t)
	const prefix = "judge-cluster"
	setLifecycle(t, g.r, "resource", prefix+"-node-0", map[string]any{"mode": "reads", "n": 2})
	seq := lastSeq(t, g.r)
	const tag = "k8s-node-route"
	mk := func(name, node, cidr, desc string) *compute.Route {
		return &compute.Route{
			Name: name, DestRange: cidr,
			NextHopInstance: fmt.Sprintf("zones/%s/instances/%s", g.r.Zone, node),
			Network:         g.networkURL(), Priority: 1000, Description: desc,
		}
	}
	routes := []*compute.Route{
		mk(prefix+"-node-0", "node-0", "10.244.0.0/24", tag),
		mk(prefix+"-node-1", "node-1", "10.244.1.0/24", tag),
		// Not the cluster's: another prefix, and one without the tag.
		mk("judge-other-node-2", "node-2", "10.245.2.0/24", tag),
		mk(prefix+"-manual", "node-2", "10.246.0.0/24", "made by hand"),
	}
	for _, r := range routes {
		if err := g.c.Routes().Insert(ctx, meta.GlobalKey(r.Name), r); err != nil {
			t.Fatalf("Routes().Insert(%s): %v", r.Name, err)
		}
	}
	t.Cleanup(func() {
		for _, r := range routes {
			_ = g.c.Routes().Delete(judgekit.Context(t), meta.GlobalKey(r.Name))
		}
	})
	// CreateRoute treats 409 as done.
	err := g.c.Routes().Insert(ctx, meta.GlobalKey(routes[0].Name), routes[0])
	if !isHTTPErrorCode(err, http.StatusConflict) {
		t.Errorf("duplicate route: %v", err)
	}
	f := filter.Regexp("name", prefix+"-.*").AndRegexp("network", g.networkURL()).AndRegexp("description", tag)
	listed, err := g.c.Routes().List(ctx, f)
	if err != nil {
		t.Fatalf("Routes().List(%s): %v", f, err)
	}
	got := map[string]string{}
	for _, r := range listed {
		got[r.Name] = last(r.NextHopInstance) + " " + r.DestRange
	}
	want := map[string]string{
		prefix + "-node-0": "node-0 10.244.0.0/24",
		prefix + "-node-1": "node-1 10.244.1.0/24",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ListRoutes filter %s: %v, want %v", f, got, want)
	}
	for _, r := range listed {
		if !strings.Contains(r.NextHopInstance, "/projects/"+g.r.ProjectID+"/zones/"+g.r.Zone+"/instances/") {
			t.Errorf("nextHopInstance %q is not a full instance URL", r.NextHopInstance)
		}
	}
	for _, r := range routes {
		if err := g.c.Routes().Delete(ctx, meta.GlobalKey(r.Name)); err != nil {
			t.Errorf("Routes().Delete(%s): %v", r.Name, err)
		}
	}
	if left, err := g.c.Routes().List(ctx, filter.Regexp("name", "judge-.*")); err != nil || len(left) != 0 {
		t.Errorf("routes left: %d, %v", len(left), err)
	}
	// Eight writes waited on; the first route's insert and delete took three looks each.
	waits := 0
	for _, e := range journalSince(t, g.r, seq) {
		if e.Operation == "compute.globalOperations.wait" {
			waits++
		}
	}
	if waits < 8+2*2 {
		t.Errorf("%d global operation waits, want at least 12", waits)
	}
}
