package judge

import (
	"context"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"ccm-conformance.invalid/judges/judgekit"
)

// Keystone v3 password authentication: the token, its expiry, the user, project and
// catalog, decoded by gophercloud's tokens extractors; then validation, revocation, and
// re-authentication after the token stops working (what the CCM relies on for
// long-lived clients).
func TestKeystonePasswordAuthAndCatalog(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	pc := provider(t, ctx, r)

	res, ok := pc.GetAuthResult().(tokens.CreateResult)
	if !ok {
		t.Fatalf("auth result is %T, not a v3 token", pc.GetAuthResult())
	}
	token, err := res.ExtractToken()
	if err != nil {
		t.Fatal(unexpected("ExtractToken", err))
	}
	if token.ID == "" || token.ID != pc.TokenID {
		t.Errorf("token id %q, provider holds %q", token.ID, pc.TokenID)
	}
	if !token.ExpiresAt.After(time.Now()) {
		t.Errorf("token expires_at %v is not in the future", token.ExpiresAt)
	}
	user, err := res.ExtractUser()
	if err != nil {
		t.Fatal(unexpected("ExtractUser", err))
	}
	if user.Name != r.Username || user.ID == "" || user.Domain.Name != r.DomainName {
		t.Errorf("user %+v, want name %q in domain %q", user, r.Username, r.DomainName)
	}
	project, err := res.ExtractProject()
	if err != nil {
		t.Fatal(unexpected("ExtractProject", err))
	}
	if project == nil || project.Name != r.ProjectName || project.ID == "" {
		t.Errorf("project %+v, want %q", project, r.ProjectName)
	}
	catalog, err := res.ExtractServiceCatalog()
	if err != nil {
		t.Fatal(unexpected("ExtractServiceCatalog", err))
	}
	types := map[string]bool{}
	for _, entry := range catalog.Entries {
		types[entry.Type] = true
		for _, ep := range entry.Endpoints {
			if ep.URL == "" || ep.Region != r.Region && ep.RegionID != r.Region {
				t.Errorf("catalog %s endpoint %+v: no URL or another region than %q", entry.Type, ep, r.Region)
			}
		}
	}
	for _, want := range []string{"identity", "compute", "network", "load-balancer"} {
		if !types[want] {
			t.Errorf("catalog has no %q service (has %v)", want, types)
		}
	}

	identity, err := openstack.NewIdentityV3(pc, endpointOpts(r))
	if err != nil {
		t.Fatalf("NewIdentityV3: %v", err)
	}
	valid, err := tokens.Validate(ctx, identity, pc.TokenID)
	if err != nil || !valid {
		t.Fatalf("tokens.Validate: %v %v", valid, err)
	}
	got := tokens.Get(ctx, identity, pc.TokenID)
	if tok, err := got.ExtractToken(); err != nil || tok.ExpiresAt.IsZero() {
		t.Fatalf("tokens.Get: %+v %v", tok, unexpected("ExtractToken", err))
	}

	// A revoked token answers 401; the provider re-authenticates and retries.
	old := pc.TokenID
	if err := tokens.Revoke(ctx, identity, old).Err; err != nil {
		t.Fatal(unexpected("tokens.Revoke", err))
	}
	compute, err := openstack.NewComputeV2(pc, endpointOpts(r))
	if err != nil {
		t.Fatalf("NewComputeV2: %v", err)
	}
	if _, err := servers.List(compute, servers.ListOpts{}).AllPages(ctx); err != nil {
		t.Fatal(unexpected("servers.List after revoking the token (re-auth expected)", err))
	}
	if pc.TokenID == old {
		t.Errorf("the provider still holds the revoked token: no re-authentication happened")
	}
}

// Nova at microversion 2.1 (the CCM sends none): servers list (detail), filtered by
// name, paged with limit/marker, server get, and the flavor of each server.
func TestNovaServersAndFlavors(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := services(t, ctx, r)

	pages, err := servers.List(c.compute, servers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("servers.List", err))
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		t.Fatal(unexpected("servers.ExtractServers", err))
	}
	if len(all) < 3 {
		t.Fatalf("%d servers, want the 3 seeded nodes", len(all))
	}
	byName := map[string]servers.Server{}
	for _, s := range all {
		byName[s.Name] = s
		if s.ID == "" || s.Status == "" || s.TenantID == "" {
			t.Errorf("server %q: id %q status %q tenant %q", s.Name, s.ID, s.Status, s.TenantID)
		}
		nonZeroTime(t, "server "+s.Name+" created", s.Created)
		nonZeroTime(t, "server "+s.Name+" updated", s.Updated)
		if len(s.Addresses) == 0 {
			t.Errorf("server %q has no addresses", s.Name)
		}
		if s.Flavor["id"] == nil {
			t.Errorf("server %q: flavor %v has no id (microversion 2.1 shape)", s.Name, s.Flavor)
		}
	}
	node0, ok := byName["node-0"]
	if !ok {
		t.Fatalf("no server node-0 among %v", names(all))
	}

	// The CCM looks a node up by an anchored name regex.
	pages, err = servers.List(c.compute, servers.ListOpts{Name: "^node-0$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("servers.List name=^node-0$", err))
	}
	one, err := servers.ExtractServers(pages)
	if err != nil {
		t.Fatal(unexpected("servers.ExtractServers", err))
	}
	if len(one) != 1 || one[0].ID != node0.ID {
		t.Errorf("name filter ^node-0$ gave %v", names(one))
	}

	// Paging: one server per page, following the servers_links "next" marker.
	seen := 0
	err = servers.List(c.compute, servers.ListOpts{Limit: 1}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		page, err := servers.ExtractServers(p)
		if err != nil {
			return false, err
		}
		if len(page) > 1 {
			t.Errorf("limit=1 page holds %d servers", len(page))
		}
		seen += len(page)
		if seen > len(all)+1 {
			t.Fatalf("paging does not end")
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(unexpected("servers.List limit=1", err))
	}
	if seen != len(all) {
		t.Errorf("paging with limit=1 saw %d servers, the full list %d", seen, len(all))
	}

	got, err := servers.Get(ctx, c.compute, node0.ID).Extract()
	if err != nil {
		t.Fatal(unexpected("servers.Get", err))
	}
	if got.Name != "node-0" || got.ID != node0.ID {
		t.Errorf("servers.Get gave %q %q", got.Name, got.ID)
	}
	if _, err := servers.Get(ctx, c.compute, "00000000-0000-0000-0000-000000000000").Extract(); !is404(err) {
		t.Errorf("servers.Get of a missing id: %v, want 404", err)
	}

	flavorID, _ := got.Flavor["id"].(string)
	flavor, err := flavors.Get(ctx, c.compute, flavorID).Extract()
	if err != nil {
		t.Fatal(unexpected("flavors.Get "+flavorID, err))
	}
	if flavor.Name == "" || flavor.VCPUs == 0 || flavor.RAM == 0 {
		t.Errorf("flavor %+v lacks name, vcpus or ram", flavor)
	}
	pages, err = flavors.ListDetail(c.compute, flavors.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(unexpected("flavors.ListDetail", err))
	}
	if fl, err := flavors.ExtractFlavors(pages); err != nil || len(fl) == 0 {
		t.Fatalf("flavors.ExtractFlavors: %d flavors, %v", len(fl), err)
	}
}

func names(list []servers.Server) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}
