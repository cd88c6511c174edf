package judge

import (
	"net/url"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"

	"ccm-conformance.invalid/judges/judgekit"
)

// Zones and regions the way connectionmanager.LookupZoneByMoref finds them: a vAPI
// session (rest.Client Login), the VM's ancestors, ListAttachedTags on each, GetTag and
// GetCategory; plus the listings (categories, tags), the session, GetAttachedTags, and
// Logout.
func TestVAPITagging(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := loggedIn(t, ctx, r)

	rc := rest.NewClient(c)
	if err := rc.Login(ctx, url.UserPassword(r.Username, "not-"+r.Password)); err == nil {
		t.Errorf("vAPI login with a wrong password succeeded")
	}
	if err := rc.Login(ctx, url.UserPassword(r.Username, r.Password)); err != nil {
		t.Fatalf("rest.Client.Login: %v", err)
	}
	s, err := rc.Session(ctx)
	if err != nil || s == nil || s.User == "" {
		t.Fatalf("rest.Client.Session: %+v %v", s, err)
	}
	m := tags.NewManager(rc)

	categories, err := m.GetCategories(ctx)
	if err != nil {
		t.Fatalf("GetCategories: %v", err)
	}
	byName := map[string]tags.Category{}
	for _, cat := range categories {
		byName[cat.Name] = cat
		if cat.ID == "" || cat.Cardinality == "" {
			t.Errorf("category %+v", cat)
		}
	}
	zoneCat, okZ := byName["k8s-zone"]
	regionCat, okR := byName["k8s-region"]
	if !okZ || !okR {
		t.Fatalf("categories %v lack k8s-zone / k8s-region", byName)
	}
	if ids, err := m.ListCategories(ctx); err != nil || len(ids) != len(categories) {
		t.Errorf("ListCategories: %v %v", ids, err)
	}
	all, err := m.GetTags(ctx)
	if err != nil {
		t.Fatalf("GetTags: %v", err)
	}
	if len(all) < 3 {
		t.Errorf("%d tags, want a region and two zones", len(all))
	}
	if ids, err := m.ListTags(ctx); err != nil || len(ids) != len(all) {
		t.Errorf("ListTags: %v %v", ids, err)
	}
	zones := 0
	for _, tag := range all {
		if tag.Name == "" || tag.ID == "" {
			t.Errorf("tag %+v", tag)
		}
		if tag.CategoryID == zoneCat.ID {
			zones++
		}
	}
	if zones < 2 {
		t.Errorf("%d tags in k8s-zone, want 2", zones)
	}

	// Every node VM sits under a host with a zone tag and a datacenter with the region tag.
	mgr := view.NewManager(c)
	cv, err := mgr.CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatalf("CreateContainerView: %v", err)
	}
	var vms []mo.VirtualMachine
	if err := cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.host"}, &vms); err != nil {
		t.Fatalf("ContainerView.Retrieve: %v", err)
	}
	_ = cv.Destroy(ctx)
	pc := property.DefaultCollector(c)
	for _, vm := range vms {
		if vm.Runtime.Host == nil {
			t.Fatalf("VM %s has no runtime.host", vm.Name)
		}
		objects, err := mo.Ancestors(ctx, c, pc.Reference(), *vm.Runtime.Host)
		if err != nil {
			t.Fatalf("mo.Ancestors(%v): %v", vm.Runtime.Host, err)
		}
		found := map[string]string{}
		for i := range objects {
			obj := objects[len(objects)-1-i]
			ids, err := m.ListAttachedTags(ctx, obj)
			if err != nil {
				t.Fatalf("ListAttachedTags(%v): %v", obj.Self, err)
			}
			for _, id := range ids {
				tag, err := m.GetTag(ctx, id)
				if err != nil {
					t.Fatalf("GetTag(%s): %v", id, err)
				}
				cat, err := m.GetCategory(ctx, tag.CategoryID)
				if err != nil {
					t.Fatalf("GetCategory(%s): %v", tag.CategoryID, err)
				}
				if _, seen := found[cat.Name]; !seen {
					found[cat.Name] = tag.Name
				}
			}
		}
		if found[zoneCat.Name] == "" || found[regionCat.Name] == "" {
			t.Errorf("VM %s: zone/region from its ancestors' tags: %v", vm.Name, found)
		}
	}

	finder := find.NewFinder(c, false)
	dc, err := finder.DefaultDatacenter(ctx)
	if err != nil {
		t.Fatalf("DefaultDatacenter: %v", err)
	}
	attached, err := m.GetAttachedTags(ctx, dc.Reference())
	if err != nil {
		t.Fatalf("GetAttachedTags(datacenter): %v", err)
	}
	if len(attached) != 1 || attached[0].CategoryID != regionCat.ID {
		t.Errorf("datacenter tags %+v, want the region tag", attached)
	}

	if err := rc.Logout(ctx); err != nil {
		t.Fatalf("rest.Client.Logout: %v", err)
	}
	if _, err := m.GetCategories(ctx); err == nil {
		t.Errorf("GetCategories after Logout succeeded")
	}
}
