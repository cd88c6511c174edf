package judge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

type network struct {
	pips   *armnetwork.PublicIPAddressesClient
	lbs    *armnetwork.LoadBalancersClient
	nics   *armnetwork.InterfacesClient
	nsgs   *armnetwork.SecurityGroupsClient
	routes *armnetwork.RoutesClient
	rts    *armnetwork.RouteTablesClient
}

func networkClients(t *testing.T, r ready) network {
	t.Helper()
	f, err := armnetwork.NewClientFactory(r.SubscriptionID, secretCredential(t, r), armOptions(t, r))
	if err != nil {
		t.Fatal(err)
	}
	return network{
		pips:   f.NewPublicIPAddressesClient(),
		lbs:    f.NewLoadBalancersClient(),
		nics:   f.NewInterfacesClient(),
		nsgs:   f.NewSecurityGroupsClient(),
		routes: f.NewRoutesClient(),
		rts:    f.NewRouteTablesClient(),
	}
}

// createPublicIP: a Standard static IPv4 public IP, as the CCM makes one per external
// LoadBalancer Service (pkg/provider/azure_loadbalancer.go ensurePublicIPExists), through
// the long-running PUT and its Azure-AsyncOperation poller. Deleted at cleanup.
func createPublicIP(t *testing.T, r ready, n network, name string) *armnetwork.PublicIPAddress {
	t.Helper()
	ctx := ctxFor(t)
	poller, err := n.pips.BeginCreateOrUpdate(ctx, r.ResourceGroup, name, armnetwork.PublicIPAddress{
		Location: to.Ptr(r.Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Tags:     map[string]*string{"k8s-azure-service": to.Ptr("judge/" + name), "k8s-azure-cluster-name": to.Ptr("judge")},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}, nil)
	if err != nil {
		t.Fatalf("PublicIPAddresses.BeginCreateOrUpdate(%s): %v", name, err)
	}
	t.Cleanup(func() { deletePublicIP(t, r, n, name) })
	done, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatalf("PollUntilDone (public IP %s): %v", name, err)
	}
	pip := done.PublicIPAddress
	if pip.Properties == nil || pip.Properties.ProvisioningState == nil ||
		*pip.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("public IP %s not Succeeded after polling: %+v", name, pip.Properties)
	}
	if pip.Properties.IPAddress == nil || !strings.HasPrefix(*pip.Properties.IPAddress, "198.18.") {
		t.Fatalf("public IP %s: ipAddress %v, want one in 198.18/16 (the mock serves it on 127.61/16)", name, pip.Properties.IPAddress)
	}
	if pip.Etag == nil || *pip.Etag == "" || pip.ID == nil {
		t.Fatalf("public IP %s has no etag/id", name)
	}
	return &pip
}

func deletePublicIP(t *testing.T, r ready, n network, name string) {
	t.Helper()
	ctx := ctxFor(t)
	poller, err := n.pips.BeginDelete(ctx, r.ResourceGroup, name, nil)
	if err != nil {
		t.Errorf("deleting public IP %s: %v", name, err)
		return
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Errorf("deleting public IP %s: %v", name, err)
	}
}

// loadBalancer is the shape the CCM writes: one frontend on a public IP, the cluster's
// backend pool, a TCP probe and a rule with floating IP (pkg/provider/azure_loadbalancer.go
// reconcileLoadBalancer), every reference an id inside the LB.
func loadBalancer(r ready, lbName, pipID string) armnetwork.LoadBalancer {
	lbID := resourceID(r, "Microsoft.Network", "loadBalancers", lbName)
	return armnetwork.LoadBalancer{
		Location: to.Ptr(r.Location),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name: to.Ptr("fe"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
					PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)},
				},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(lbName)}},
			Probes: []*armnetwork.Probe{{
				Name: to.Ptr("fe-TCP-80"),
				Properties: &armnetwork.ProbePropertiesFormat{
					Protocol:          to.Ptr(armnetwork.ProbeProtocolTCP),
					Port:              to.Ptr[int32](30080),
					IntervalInSeconds: to.Ptr[int32](5),
					ProbeThreshold:    to.Ptr[int32](2),
				},
			}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{
				Name: to.Ptr("fe-TCP-80"),
				Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					Protocol:                to.Ptr(armnetwork.TransportProtocolTCP),
					FrontendPort:            to.Ptr[int32](80),
					BackendPort:             to.Ptr[int32](80),
					EnableFloatingIP:        to.Ptr(true),
					IdleTimeoutInMinutes:    to.Ptr[int32](4),
					DisableOutboundSnat:     to.Ptr(false),
					FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/fe")},
					BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "/backendAddressPools/" + lbName)},
					Probe:                   &armnetwork.SubResource{ID: to.Ptr(lbID + "/probes/fe-TCP-80")},
				},
			}},
		},
	}
}

// TestLoadBalancerLifecycle walks a load balancer through what the CCM does to it:
// create on a public IP, read it back, update with the etag it read, lose a race (stale
// If-Match → 412, nothing applied), put a node's NIC in its pool, delete it, and find it
// gone (404 ResourceNotFound as an *azcore.ResponseError).
func TestLoadBalancerLifecycle(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	ctx := ctxFor(t)
	lbName := uniqueName("judge-lb")
	lbID := resourceID(r, "Microsoft.Network", "loadBalancers", lbName)
	pip := createPublicIP(t, r, n, lbName+"-pip")

	poller, err := n.lbs.BeginCreateOrUpdate(ctx, r.ResourceGroup, lbName, loadBalancer(r, lbName, *pip.ID), nil)
	if err != nil {
		t.Fatalf("LoadBalancers.BeginCreateOrUpdate: %v", err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			if p, err := n.lbs.BeginDelete(ctxFor(t), r.ResourceGroup, lbName, nil); err == nil {
				_, _ = p.PollUntilDone(ctxFor(t), nil)
			}
		}
	})
	created, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatalf("PollUntilDone (load balancer): %v", err)
	}
	lb := created.LoadBalancer
	if lb.ID == nil || !sameID(*lb.ID, lbID) {
		t.Errorf("load balancer id %v, want %s", lb.ID, lbID)
	}
	if lb.Properties == nil || lb.Properties.ProvisioningState == nil ||
		*lb.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("load balancer not Succeeded after polling: %+v", lb.Properties)
	}
	if len(lb.Properties.FrontendIPConfigurations) != 1 || len(lb.Properties.LoadBalancingRules) != 1 ||
		len(lb.Properties.Probes) != 1 || len(lb.Properties.BackendAddressPools) != 1 {
		t.Fatalf("load balancer children: %d frontends, %d rules, %d probes, %d pools",
			len(lb.Properties.FrontendIPConfigurations), len(lb.Properties.LoadBalancingRules),
			len(lb.Properties.Probes), len(lb.Properties.BackendAddressPools))
	}
	fe := lb.Properties.FrontendIPConfigurations[0]
	if fe.ID == nil || !sameID(*fe.ID, lbID+"/frontendIPConfigurations/fe") {
		t.Errorf("frontend id %v", fe.ID)
	}
	if fe.Properties == nil || fe.Properties.PublicIPAddress == nil || fe.Properties.PublicIPAddress.ID == nil ||
		!sameID(*fe.Properties.PublicIPAddress.ID, *pip.ID) {
		t.Errorf("frontend's public IP %+v, want %s", fe.Properties, *pip.ID)
	}
	rule := lb.Properties.LoadBalancingRules[0]
	if rule.Properties == nil || rule.Properties.Probe == nil || !sameID(*rule.Properties.Probe.ID, lbID+"/probes/fe-TCP-80") {
		t.Errorf("rule's probe %+v", rule.Properties)
	}

	// The public IP now names the frontend that uses it; the CCM reads
	// properties.ipConfiguration to decide whether a public IP is still in use.
	gotPIP, err := n.pips.Get(ctx, r.ResourceGroup, *pip.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gotPIP.Properties == nil || gotPIP.Properties.IPConfiguration == nil || gotPIP.Properties.IPConfiguration.ID == nil ||
		!sameID(*gotPIP.Properties.IPConfiguration.ID, lbID+"/frontendIPConfigurations/fe") {
		t.Errorf("public IP's properties.ipConfiguration %+v, want the LB frontend", gotPIP.Properties)
	}

	// Update with the etag read (the CCM's If-Match), then once more with that same, now
	// stale, etag: 412 PreconditionFailed and nothing applied.
	got, err := n.lbs.Get(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Etag == nil || *got.Etag == "" {
		t.Fatal("GET load balancer: no etag")
	}
	first := got.LoadBalancer
	staleEtag := *first.Etag
	first.Tags = map[string]*string{"round": to.Ptr("1")}
	p1, err := n.lbs.BeginCreateOrUpdate(ctx, r.ResourceGroup, lbName, first, nil)
	if err != nil {
		t.Fatalf("update with the current etag: %v", err)
	}
	updated, err := p1.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatalf("update with the current etag: %v", err)
	}
	if updated.Etag == nil || *updated.Etag == staleEtag {
		t.Fatalf("the etag did not change on update (%v)", updated.Etag)
	}
	stale := got.LoadBalancer
	stale.Etag = to.Ptr(staleEtag)
	stale.Tags = map[string]*string{"round": to.Ptr("stale")}
	_, err = n.lbs.BeginCreateOrUpdate(ctx, r.ResourceGroup, lbName, stale, nil)
	responseError(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
	after, err := n.lbs.Get(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := after.Tags["round"]; v == nil || *v != "1" {
		t.Errorf("a write refused with 412 changed the load balancer: tags %v", after.Tags)
	}

	// If-None-Match: * on an existing resource is refused too.
	createOnly := runtime.WithHTTPHeader(ctx, http.Header{"If-None-Match": []string{"*"}})
	fresh := loadBalancer(r, lbName, *pip.ID)
	_, err = n.lbs.BeginCreateOrUpdate(createOnly, r.ResourceGroup, lbName, fresh, nil)
	responseError(t, err, http.StatusPreconditionFailed, "PreconditionFailed")

	// A public IP a frontend uses cannot be deleted.
	_, err = n.pips.BeginDelete(ctx, r.ResourceGroup, *pip.Name, nil)
	responseError(t, err, http.StatusBadRequest, "PublicIPAddressInUse")

	t.Run("NICJoinsBackendPool", func(t *testing.T) {
		nicJoinsPool(t, r, n, lbName, lbID+"/backendAddressPools/"+lbName)
	})

	del, err := n.lbs.BeginDelete(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatalf("LoadBalancers.BeginDelete: %v", err)
	}
	if _, err := del.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("PollUntilDone (delete): %v", err)
	}
	deleted = true
	_, err = n.lbs.Get(ctx, r.ResourceGroup, lbName, nil)
	responseError(t, err, http.StatusNotFound, "ResourceNotFound")

	// Deleting what is gone succeeds (204), as ARM's DELETE is idempotent.
	again, err := n.lbs.BeginDelete(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatalf("deleting a deleted load balancer: %v", err)
	}
	if _, err := again.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("deleting a deleted load balancer: %v", err)
	}
}

// nicJoinsPool: a standard VM joins a backend pool through its NIC's ipConfiguration
// (pkg/provider/azure_standard.go EnsureHostInPool); the pool's backendIPConfigurations
// is computed from the NICs. The NIC is restored afterwards.
func nicJoinsPool(t *testing.T, r ready, n network, lbName, poolID string) {
	ctx := ctxFor(t)
	vms := listVMs(t, r)
	if len(vms) == 0 || vms[0].Properties == nil || vms[0].Properties.NetworkProfile == nil ||
		len(vms[0].Properties.NetworkProfile.NetworkInterfaces) == 0 {
		t.Fatal("no VM with a NIC")
	}
	nicID := *vms[0].Properties.NetworkProfile.NetworkInterfaces[0].ID
	nicName := nicID[strings.LastIndex(nicID, "/")+1:]
	got, err := n.nics.Get(ctx, r.ResourceGroup, nicName, nil)
	if err != nil {
		t.Fatalf("Interfaces.Get(%s): %v", nicName, err)
	}
	nic := got.Interface
	if nic.Properties == nil || len(nic.Properties.IPConfigurations) == 0 || nic.Properties.IPConfigurations[0].Properties == nil {
		t.Fatalf("NIC %s has no ipConfigurations", nicName)
	}
	ipc := nic.Properties.IPConfigurations[0]
	if ipc.Properties.PrivateIPAddress == nil || !strings.HasPrefix(*ipc.Properties.PrivateIPAddress, "127.60.") {
		t.Errorf("NIC %s private IP %v, want one in 127.60/16", nicName, ipc.Properties.PrivateIPAddress)
	}
	original := append([]*armnetwork.BackendAddressPool(nil), ipc.Properties.LoadBalancerBackendAddressPools...)
	ipc.Properties.LoadBalancerBackendAddressPools = append(original, &armnetwork.BackendAddressPool{ID: to.Ptr(poolID)})
	put := func(nic armnetwork.Interface) armnetwork.Interface {
		t.Helper()
		p, err := n.nics.BeginCreateOrUpdate(ctx, r.ResourceGroup, nicName, nic, nil)
		if err != nil {
			t.Fatalf("Interfaces.BeginCreateOrUpdate(%s): %v", nicName, err)
		}
		done, err := p.PollUntilDone(ctx, nil)
		if err != nil {
			t.Fatalf("PollUntilDone (NIC %s): %v", nicName, err)
		}
		return done.Interface
	}
	put(nic)
	t.Cleanup(func() {
		cur, err := n.nics.Get(ctxFor(t), r.ResourceGroup, nicName, nil)
		if err != nil {
			t.Errorf("re-reading NIC %s: %v", nicName, err)
			return
		}
		cur.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = original
		put(cur.Interface)
	})

	lb, err := n.lbs.Get(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pool := range lb.Properties.BackendAddressPools {
		if pool.Properties == nil {
			continue
		}
		for _, bic := range pool.Properties.BackendIPConfigurations {
			if bic.ID != nil && ipc.ID != nil && sameID(*bic.ID, *ipc.ID) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("the pool's backendIPConfigurations do not list NIC %s's ipConfiguration %v", nicName, ipc.ID)
	}
}

// TestInvalidReference: a frontend on a public IP that does not exist is refused with
// 400 InvalidResourceReference, nothing created.
func TestInvalidReference(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	ctx := ctxFor(t)
	lbName := uniqueName("judge-badref")
	missing := resourceID(r, "Microsoft.Network", "publicIPAddresses", "no-such-pip")
	_, err := n.lbs.BeginCreateOrUpdate(ctx, r.ResourceGroup, lbName, loadBalancer(r, lbName, missing), nil)
	responseError(t, err, http.StatusBadRequest, "InvalidResourceReference")
	_, err = n.lbs.Get(ctx, r.ResourceGroup, lbName, nil)
	responseError(t, err, http.StatusNotFound, "ResourceNotFound")
}

// TestPublicIPPaging: more public IPs than one page holds come back through nextLink,
// each once.
func TestPublicIPPaging(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	base := uniqueName("judge-page")
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		name := base + "-" + string(rune('a'+i))
		createPublicIP(t, r, n, name)
		want[name] = true
	}
	pager := n.pips.NewListPager(r.ResourceGroup, nil)
	pages, seen := 0, map[string]int{}
	for pager.More() {
		if pages > 100 {
			t.Fatal("more than 100 pages: nextLink never ends")
		}
		page, err := pager.NextPage(ctxFor(t))
		if err != nil {
			t.Fatalf("listing public IPs: %v", err)
		}
		pages++
		for _, p := range page.Value {
			seen[*p.Name]++
		}
	}
	for name := range want {
		if seen[name] != 1 {
			t.Errorf("public IP %s listed %d times", name, seen[name])
		}
	}
	if pages < 2 {
		t.Errorf("%d public IPs came in %d page(s): paging was not exercised", len(seen), pages)
	}
}

// TestSecurityRuleOnSeededNSG: the CCM adds and removes rules by writing the whole NSG with
// its etag (pkg/provider/azure_loadbalancer.go reconcileSecurityGroup).
func TestSecurityRuleOnSeededNSG(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	ctx := ctxFor(t)
	put := func(nsg armnetwork.SecurityGroup) armnetwork.SecurityGroup {
		t.Helper()
		p, err := n.nsgs.BeginCreateOrUpdate(ctx, r.ResourceGroup, r.SecurityGroupName, nsg, nil)
		if err != nil {
			t.Fatalf("SecurityGroups.BeginCreateOrUpdate: %v", err)
		}
		done, err := p.PollUntilDone(ctx, nil)
		if err != nil {
			t.Fatalf("PollUntilDone (NSG): %v", err)
		}
		return done.SecurityGroup
	}
	got, err := n.nsgs.Get(ctx, r.ResourceGroup, r.SecurityGroupName, nil)
	if err != nil {
		t.Fatalf("SecurityGroups.Get(%s): %v", r.SecurityGroupName, err)
	}
	nsg := got.SecurityGroup
	if nsg.Properties == nil {
		t.Fatal("NSG without properties")
	}
	ruleName := uniqueName("judge-rule")
	before := len(nsg.Properties.SecurityRules)
	nsg.Properties.SecurityRules = append(nsg.Properties.SecurityRules, &armnetwork.SecurityRule{
		Name: to.Ptr(ruleName),
		Properties: &armnetwork.SecurityRulePropertiesFormat{
			Protocol:                 to.Ptr(armnetwork.SecurityRuleProtocolTCP),
			Access:                   to.Ptr(armnetwork.SecurityRuleAccessAllow),
			Direction:                to.Ptr(armnetwork.SecurityRuleDirectionInbound),
			Priority:                 to.Ptr[int32](500),
			SourceAddressPrefix:      to.Ptr("Internet"),
			SourcePortRange:          to.Ptr("*"),
			DestinationAddressPrefix: to.Ptr("127.61.0.1"),
			DestinationPortRange:     to.Ptr("80"),
		},
	})
	withRule := put(nsg)
	var rule *armnetwork.SecurityRule
	for _, sr := range withRule.Properties.SecurityRules {
		if sr.Name != nil && *sr.Name == ruleName {
			rule = sr
		}
	}
	if rule == nil || rule.ID == nil || !strings.HasSuffix(strings.ToLower(*rule.ID), strings.ToLower("/securityRules/"+ruleName)) {
		t.Fatalf("the NSG does not hold rule %s with its id: %+v", ruleName, rule)
	}
	// Remove it again (with the etag just returned).
	var keep []*armnetwork.SecurityRule
	for _, sr := range withRule.Properties.SecurityRules {
		if sr.Name == nil || *sr.Name != ruleName {
			keep = append(keep, sr)
		}
	}
	withRule.Properties.SecurityRules = keep
	if after := put(withRule); len(after.Properties.SecurityRules) != before {
		t.Errorf("%d rules after removing %s, want %d", len(after.Properties.SecurityRules), ruleName, before)
	}
}

// TestRouteInSeededRouteTable: a node's pod CIDR route, created and deleted through the
// routes sub-resource, visible in the route table.
func TestRouteInSeededRouteTable(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	ctx := ctxFor(t)
	name := uniqueName("judge-node")
	p, err := n.routes.BeginCreateOrUpdate(ctx, r.ResourceGroup, r.RouteTableName, name, armnetwork.Route{
		Properties: &armnetwork.RoutePropertiesFormat{
			AddressPrefix:    to.Ptr("10.244.9.0/24"),
			NextHopType:      to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance),
			NextHopIPAddress: to.Ptr("127.60.0.10"),
		},
	}, nil)
	if err != nil {
		t.Fatalf("Routes.BeginCreateOrUpdate: %v", err)
	}
	done, err := p.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatalf("PollUntilDone (route): %v", err)
	}
	if done.Properties == nil || done.Properties.AddressPrefix == nil || *done.Properties.AddressPrefix != "10.244.9.0/24" {
		t.Errorf("route after create: %+v", done.Properties)
	}
	rt, err := n.rts.Get(ctx, r.ResourceGroup, r.RouteTableName, nil)
	if err != nil {
		t.Fatalf("RouteTables.Get: %v", err)
	}
	found := false
	for _, route := range rt.Properties.Routes {
		found = found || (route.Name != nil && *route.Name == name)
	}
	if !found {
		t.Errorf("route table %s does not list route %s", r.RouteTableName, name)
	}
	del, err := n.routes.BeginDelete(ctx, r.ResourceGroup, r.RouteTableName, name, nil)
	if err != nil {
		t.Fatalf("Routes.BeginDelete: %v", err)
	}
	if _, err := del.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("PollUntilDone (route delete): %v", err)
	}
	_, err = n.routes.Get(ctx, r.ResourceGroup, r.RouteTableName, name, nil)
	responseError(t, err, http.StatusNotFound, "ResourceNotFound")
}
