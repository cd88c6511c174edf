package judge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/extraroutes"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsecurity"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"ccm-conformance.invalid/judges/judgekit"
)

// Networks, subnets and a server's ports (how the CCM finds node addresses and the
// load balancer's subnet), and the extensions the route controller checks.
func TestNeutronNetworksSubnetsPorts(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	pages, err := networks.List(c.network, networks.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("networks.List", err))
	}
	nets, err := networks.ExtractNetworks(pages)
	if err != nil {
		t.Fatal(unexpected("networks.ExtractNetworks", err))
	}
	if len(nets) < 2 {
		t.Fatalf("%d networks, want the private and public ones", len(nets))
	}
	for _, n := range nets {
		nonZeroTime(t, "network "+n.Name+" created_at", n.CreatedAt)
		if len(n.Subnets) == 0 {
			t.Errorf("network %q lists no subnets", n.Name)
		}
		got, err := networks.Get(ctx, c.network, n.ID).Extract()
		if err != nil || got.ID != n.ID {
			t.Errorf("networks.Get %s: %v", n.ID, unexpected("networks.Get", err))
		}
	}
	pages, err = networks.List(c.network, networks.ListOpts{Name: nets[0].Name}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("networks.List name=", err))
	}
	if byName, err := networks.ExtractNetworks(pages); err != nil || len(byName) != 1 {
		t.Errorf("networks.List name=%q gave %d networks (%v)", nets[0].Name, len(byName), err)
	}

	pages, err = subnets.List(c.network, subnets.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("subnets.List", err))
	}
	subs, err := subnets.ExtractSubnets(pages)
	if err != nil {
		t.Fatal(unexpected("subnets.ExtractSubnets", err))
	}
	if len(subs) < 2 {
		t.Fatalf("%d subnets, want 2", len(subs))
	}
	for _, s := range subs {
		if s.CIDR == "" || s.NetworkID == "" || s.IPVersion != 4 {
			t.Errorf("subnet %+v: cidr, network_id or ip_version missing", s)
		}
		nonZeroTime(t, "subnet "+s.Name+" created_at", s.CreatedAt)
		if got, err := subnets.Get(ctx, c.network, s.ID).Extract(); err != nil || got.CIDR != s.CIDR {
			t.Errorf("subnets.Get %s: %v", s.ID, unexpected("subnets.Get", err))
		}
	}

	pages, err = servers.List(c.compute, servers.ListOpts{Name: "^node-1$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("servers.List", err))
	}
	srv, err := servers.ExtractServers(pages)
	if err != nil || len(srv) != 1 {
		t.Fatalf("server node-1: %d found (%v)", len(srv), err)
	}
	pages, err = ports.List(c.network, ports.ListOpts{DeviceID: srv[0].ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("ports.List device_id=", err))
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil {
		t.Fatal(unexpected("ports.ExtractPorts", err))
	}
	if len(ps) == 0 {
		t.Fatalf("no port has device_id %s", srv[0].ID)
	}
	for _, p := range ps {
		if p.DeviceID != srv[0].ID || len(p.FixedIPs) == 0 || p.MACAddress == "" || p.NetworkID == "" {
			t.Errorf("port %+v: wrong device, or no fixed IPs / MAC / network", p)
		}
		nonZeroTime(t, "port created_at", p.CreatedAt)
		got, err := ports.Get(ctx, c.network, p.ID).Extract()
		if err != nil || got.ID != p.ID {
			t.Errorf("ports.Get %s: %v", p.ID, unexpected("ports.Get", err))
		}
	}
	if _, err := ports.Get(ctx, c.network, "00000000-0000-0000-0000-000000000000").Extract(); !is404(err) {
		t.Errorf("ports.Get of a missing id: %v, want 404", err)
	}

	pages, err = extensions.List(c.network).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("extensions.List", err))
	}
	exts, err := extensions.ExtractExtensions(pages)
	if err != nil {
		t.Fatal(unexpected("extensions.ExtractExtensions", err))
	}
	aliases := map[string]bool{}
	for _, e := range exts {
		aliases[e.Alias] = true
	}
	for _, want := range []string{"extraroute", "extraroute-atomic", "allowed-address-pairs"} {
		if !aliases[want] {
			t.Errorf("extension %q not listed (have %v)", want, aliases)
		}
	}
	if e, err := extensions.Get(ctx, c.network, "extraroute-atomic").Extract(); err != nil || e.Alias != "extraroute-atomic" {
		t.Errorf("extensions.Get extraroute-atomic: %+v %v", e, err)
	}
}

// Floating IPs: create on the external network bound to a server's port, list by port,
// get, detach, delete, then 404.
func TestNeutronFloatingIPs(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	pages, err := networks.List(c.network, networks.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("networks.List", err))
	}
	// The CCM's way to see router:external (gophercloud's documented extension pattern).
	var all []struct {
		networks.Network
		external.NetworkExternalExt
	}
	if err := networks.ExtractNetworksInto(pages, &all); err != nil {
		t.Fatal(unexpected("networks.ExtractNetworksInto", err))
	}
	public := ""
	for _, n := range all {
		if n.External {
			public = n.ID
		}
	}
	if public == "" {
		t.Fatalf("no network has router:external=true")
	}
	pages, err = ports.List(c.network, ports.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("ports.List", err))
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil {
		t.Fatal(unexpected("ports.ExtractPorts", err))
	}
	// A server's port (device_owner compute:<zone>), as a floating IP goes on a VM's NIC.
	var port ports.Port
	for _, p := range ps {
		if strings.HasPrefix(p.DeviceOwner, "compute:") {
			port = p
			break
		}
	}
	if port.ID == "" {
		t.Fatalf("no port with device_owner compute:* among %d ports", len(ps))
	}

	fip, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{
		FloatingNetworkID: public,
		PortID:            port.ID,
		Description:       "judge",
	}).Extract()
	if err != nil {
		t.Fatal(unexpected("floatingips.Create", err))
	}
	if fip.FloatingIP == "" || fip.PortID != port.ID || fip.FloatingNetworkID != public || fip.FixedIP == "" {
		t.Errorf("created floating IP %+v", fip)
	}
	nonZeroTime(t, "floating IP created_at", fip.CreatedAt)

	pages, err = floatingips.List(c.network, floatingips.ListOpts{PortID: port.ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("floatingips.List port_id=", err))
	}
	list, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil || len(list) != 1 || list[0].ID != fip.ID {
		t.Errorf("floatingips.List port_id=%s: %+v (%v)", port.ID, list, err)
	}
	got, err := floatingips.Get(ctx, c.network, fip.ID).Extract()
	if err != nil || got.FloatingIP != fip.FloatingIP {
		t.Errorf("floatingips.Get: %+v %v", got, err)
	}
	none := ""
	desc := "detached"
	upd, err := floatingips.Update(ctx, c.network, fip.ID, floatingips.UpdateOpts{PortID: &none, Description: &desc}).Extract()
	if err != nil {
		t.Fatal(unexpected("floatingips.Update port_id=null", err))
	}
	if upd.PortID != "" || upd.Description != desc {
		t.Errorf("after detaching: port %q description %q", upd.PortID, upd.Description)
	}
	if err := floatingips.Delete(ctx, c.network, fip.ID).ExtractErr(); err != nil {
		t.Fatal(unexpected("floatingips.Delete", err))
	}
	if _, err := floatingips.Get(ctx, c.network, fip.ID).Extract(); !is404(err) {
		t.Errorf("floatingips.Get after delete: %v, want 404", err)
	}
}

// The route controller's calls: routers list/get, atomic add/remove of extra routes, and
// the non-atomic full replacement through a router update.
func TestNeutronRouterExtraRoutes(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	pages, err := routers.List(c.network, routers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("routers.List", err))
	}
	rs, err := routers.ExtractRouters(pages)
	if err != nil || len(rs) == 0 {
		t.Fatalf("routers: %d (%v)", len(rs), err)
	}
	router := rs[0]
	if router.GatewayInfo.NetworkID == "" {
		t.Errorf("router %+v has no external gateway", router)
	}
	hop := "127.10.0.201"
	add := []routers.Route{
		{DestinationCIDR: "10.244.1.0/24", NextHop: hop},
		{DestinationCIDR: "10.244.2.0/24", NextHop: hop},
	}
	got, err := extraroutes.Add(ctx, c.network, router.ID, extraroutes.Opts{Routes: &add}).Extract()
	if err != nil {
		t.Fatal(unexpected("extraroutes.Add", err))
	}
	if !hasRoutes(got.Routes, add...) {
		t.Errorf("after add_extraroutes: %+v", got.Routes)
	}
	remove := add[:1]
	got, err = extraroutes.Remove(ctx, c.network, router.ID, extraroutes.Opts{Routes: &remove}).Extract()
	if err != nil {
		t.Fatal(unexpected("extraroutes.Remove", err))
	}
	if hasRoutes(got.Routes, add[0]) || !hasRoutes(got.Routes, add[1]) {
		t.Errorf("after remove_extraroutes: %+v", got.Routes)
	}
	// A nexthop outside the router's subnets is refused (Neutron: 400 InvalidRoutes).
	bad := []routers.Route{{DestinationCIDR: "10.244.9.0/24", NextHop: "192.0.2.1"}}
	if _, err := extraroutes.Add(ctx, c.network, router.ID, extraroutes.Opts{Routes: &bad}).Extract(); err == nil {
		t.Errorf("extraroutes.Add with an unreachable nexthop succeeded")
	}
	// Full replacement (the path for clouds without extraroute-atomic), then clean up.
	replace := []routers.Route{{DestinationCIDR: "10.244.3.0/24", NextHop: hop}}
	upd, err := routers.Update(ctx, c.network, router.ID, routers.UpdateOpts{Routes: &replace}).Extract()
	if err != nil {
		t.Fatal(unexpected("routers.Update routes", err))
	}
	if len(upd.Routes) != 1 || !hasRoutes(upd.Routes, replace...) {
		t.Errorf("after routers.Update: %+v", upd.Routes)
	}
	empty := []routers.Route{}
	if _, err := routers.Update(ctx, c.network, router.ID, routers.UpdateOpts{Routes: &empty}).Extract(); err != nil {
		t.Fatal(unexpected("routers.Update routes=[]", err))
	}
	final, err := routers.Get(ctx, c.network, router.ID).Extract()
	if err != nil {
		t.Fatal(unexpected("routers.Get", err))
	}
	if len(final.Routes) != 0 {
		t.Errorf("routes left: %+v", final.Routes)
	}
}

func hasRoutes(have []routers.Route, want ...routers.Route) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h.DestinationCIDR == w.DestinationCIDR && h.NextHop == w.NextHop {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Security groups as the CCM manages them for load balancer members: create, rules
// create/list/delete, lookup by name, update, delete, then 404.
func TestNeutronSecurityGroups(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	name := fmt.Sprintf("lb-sg-judge-%d", time.Now().UnixNano())
	sg, err := groups.Create(ctx, c.network, groups.CreateOpts{Name: name, Description: "judge"}).Extract()
	if err != nil {
		t.Fatal(unexpected("groups.Create", err))
	}
	if sg.ID == "" || sg.Name != name {
		t.Errorf("created group %+v", sg)
	}
	nonZeroTime(t, "security group created_at", sg.CreatedAt)
	// Neutron adds two egress rules (IPv4 and IPv6) to a new group.
	if len(sg.Rules) != 2 {
		t.Errorf("new group has %d rules, Neutron adds 2 default egress rules", len(sg.Rules))
	}
	rule, err := rules.Create(ctx, c.network, rules.CreateOpts{
		Direction:      rules.DirIngress,
		EtherType:      rules.EtherType4,
		SecGroupID:     sg.ID,
		Protocol:       rules.ProtocolTCP,
		PortRangeMin:   30080,
		PortRangeMax:   30080,
		RemoteIPPrefix: "0.0.0.0/0",
	}).Extract()
	if err != nil {
		t.Fatal(unexpected("rules.Create", err))
	}
	if rule.SecGroupID != sg.ID || rule.PortRangeMin != 30080 || rule.Protocol != "tcp" || rule.Direction != "ingress" {
		t.Errorf("created rule %+v", rule)
	}
	// The same rule again is a 409 (SecurityGroupRuleExists).
	if _, err := rules.Create(ctx, c.network, rules.CreateOpts{
		Direction: rules.DirIngress, EtherType: rules.EtherType4, SecGroupID: sg.ID,
		Protocol: rules.ProtocolTCP, PortRangeMin: 30080, PortRangeMax: 30080, RemoteIPPrefix: "0.0.0.0/0",
	}).Extract(); err == nil {
		t.Errorf("a duplicate rule was accepted")
	}
	pages, err := rules.List(c.network, rules.ListOpts{SecGroupID: sg.ID, Direction: "ingress"}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("rules.List", err))
	}
	if rs, err := rules.ExtractRules(pages); err != nil || len(rs) != 1 || rs[0].ID != rule.ID {
		t.Errorf("rules.List security_group_id,direction=ingress: %+v (%v)", rs, err)
	}
	pages, err = groups.List(c.network, groups.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("groups.List name=", err))
	}
	if gs, err := groups.ExtractGroups(pages); err != nil || len(gs) != 1 || gs[0].ID != sg.ID {
		t.Errorf("groups.List name=%s: %+v (%v)", name, gs, err)
	}
	desc := "updated"
	upd, err := groups.Update(ctx, c.network, sg.ID, groups.UpdateOpts{Description: &desc}).Extract()
	if err != nil || upd.Description != desc {
		t.Errorf("groups.Update: %+v %v", upd, err)
	}
	if err := rules.Delete(ctx, c.network, rule.ID).ExtractErr(); err != nil {
		t.Fatal(unexpected("rules.Delete", err))
	}
	if _, err := rules.Get(ctx, c.network, rule.ID).Extract(); !is404(err) {
		t.Errorf("rules.Get after delete: %v, want 404", err)
	}
	got, err := groups.Get(ctx, c.network, sg.ID).Extract()
	if err != nil {
		t.Fatal(unexpected("groups.Get", err))
	}
	if len(got.Rules) != 2 {
		t.Errorf("group has %d rules after deleting ours, want the 2 defaults", len(got.Rules))
	}
	if err := groups.Delete(ctx, c.network, sg.ID).ExtractErr(); err != nil {
		t.Fatal(unexpected("groups.Delete", err))
	}
	if _, err := groups.Get(ctx, c.network, sg.ID).Extract(); !is404(err) {
		t.Errorf("groups.Get after delete: %v, want 404", err)
	}
}

// The route controller's port calls (cloud-provider-openstack routes.go): the router's
// ports name the networks it routes on, the node's port is found by fixed IP on such a
// network, and its allowed_address_pairs get the pod CIDR (MAC defaulting to the port's),
// then lose it again.
func TestNeutronPortAllowedAddressPairs(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	pages, err := routers.List(c.network, routers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("routers.List", err))
	}
	rs, err := routers.ExtractRouters(pages)
	if err != nil || len(rs) == 0 {
		t.Fatalf("routers: %d (%v)", len(rs), err)
	}
	pages, err = ports.List(c.network, ports.ListOpts{DeviceID: rs[0].ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("ports.List device_id=<router>", err))
	}
	routerPorts, err := ports.ExtractPorts(pages)
	if err != nil {
		t.Fatal(unexpected("ports.ExtractPorts", err))
	}
	var networkIDs []string
	for _, p := range routerPorts {
		if p.DeviceOwner == "network:router_interface" {
			networkIDs = append(networkIDs, p.NetworkID)
		}
	}
	if len(networkIDs) == 0 {
		t.Fatalf("the router has no network:router_interface port (ports %+v)", routerPorts)
	}

	pages, err = servers.List(c.compute, servers.ListOpts{Name: "^node-2$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("servers.List", err))
	}
	srv, err := servers.ExtractServers(pages)
	if err != nil || len(srv) != 1 {
		t.Fatalf("server node-2: %d (%v)", len(srv), err)
	}
	ip := ""
	for _, a := range memberAddressesOf(srv[0]) {
		ip = a
	}
	if ip == "" {
		t.Fatalf("node-2 has no fixed IPv4 address: %v", srv[0].Addresses)
	}
	pages, err = ports.List(c.network, ports.ListOpts{
		FixedIPs:  []ports.FixedIPOpts{{IPAddress: ip}},
		NetworkID: networkIDs[0],
	}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("ports.List fixed_ips=ip_address=", err))
	}
	// Decoded as the CCM does, with the port-security extension.
	var found []struct {
		ports.Port
		portsecurity.PortSecurityExt
	}
	if err := ports.ExtractPortsInto(pages, &found); err != nil {
		t.Fatal(unexpected("ports.ExtractPortsInto", err))
	}
	if len(found) != 1 || found[0].DeviceID != srv[0].ID {
		t.Fatalf("port with fixed IP %s: %+v", ip, found)
	}
	port := found[0]

	pairs := append([]ports.AddressPair{}, port.AllowedAddressPairs...)
	pairs = append(pairs, ports.AddressPair{IPAddress: "10.244.7.0/24"})
	upd, err := ports.Update(ctx, c.network, port.ID, ports.UpdateOpts{AllowedAddressPairs: &pairs}).Extract()
	if err != nil {
		t.Fatal(unexpected("ports.Update allowed_address_pairs", err))
	}
	if len(upd.AllowedAddressPairs) != len(pairs) {
		t.Fatalf("after adding a pair: %+v", upd.AllowedAddressPairs)
	}
	last := upd.AllowedAddressPairs[len(upd.AllowedAddressPairs)-1]
	if last.IPAddress != "10.244.7.0/24" || last.MACAddress != port.MACAddress {
		t.Errorf("added pair %+v, want the CIDR with the port's MAC %s", last, port.MACAddress)
	}
	nonZeroTime(t, "port updated_at", upd.UpdatedAt)
	got, err := ports.Get(ctx, c.network, port.ID).Extract()
	if err != nil || len(got.AllowedAddressPairs) != len(pairs) {
		t.Errorf("ports.Get after the update: %+v %v", got, err)
	}
	original := port.AllowedAddressPairs
	if original == nil {
		original = []ports.AddressPair{}
	}
	back, err := ports.Update(ctx, c.network, port.ID, ports.UpdateOpts{AllowedAddressPairs: &original}).Extract()
	if err != nil {
		t.Fatal(unexpected("ports.Update restoring allowed_address_pairs", err))
	}
	if len(back.AllowedAddressPairs) != len(port.AllowedAddressPairs) {
		t.Errorf("after restoring: %+v", back.AllowedAddressPairs)
	}
	bad := []ports.AddressPair{{IPAddress: "not-an-ip"}}
	if _, err := ports.Update(ctx, c.network, port.ID, ports.UpdateOpts{AllowedAddressPairs: &bad}).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		t.Errorf("an invalid pair: %v, want 400", err)
	}
}
