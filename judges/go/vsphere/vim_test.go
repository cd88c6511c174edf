package judge

import (
	"crypto/tls"
	"net/url"
	"strings"
	"testing"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"ccm-conformance.invalid/judges/judgekit"
)

// The session: service content, Login over verified TLS (and a refused bad password
// and untrusted certificate), the user session, the session still valid.
func TestSessionLogin(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	if r.Insecure {
		t.Errorf("ready file says insecure: the mock's CA should verify its certificate")
	}

	c := soapClient(t, ctx, r)
	about := c.ServiceContent.About
	if about.ApiType != "VirtualCenter" || about.ApiVersion == "" || !c.IsVC() {
		t.Errorf("service content About %+v: want a vCenter", about)
	}
	if c.ServiceContent.SearchIndex == nil || c.ServiceContent.PropertyCollector.Value == "" || c.ServiceContent.ViewManager == nil {
		t.Errorf("service content lacks SearchIndex / PropertyCollector / ViewManager")
	}

	m := session.NewManager(c)
	err := m.Login(ctx, url.UserPassword(r.Username, "not-"+r.Password))
	if err == nil {
		t.Fatalf("Login with a wrong password succeeded")
	}
	if !fault.Is(err, &types.InvalidLogin{}) {
		t.Errorf("Login with a wrong password: %v, want InvalidLogin", err)
	}
	if err := m.Login(ctx, url.UserPassword(r.Username, r.Password)); err != nil {
		t.Fatalf("SessionManager.Login: %v", err)
	}
	us, err := m.UserSession(ctx)
	if err != nil || us == nil {
		t.Fatalf("UserSession: %+v %v", us, err)
	}
	if !strings.EqualFold(us.UserName, r.Username) && !strings.HasSuffix(strings.ToLower(us.UserName), strings.ToLower(strings.Split(r.Username, "@")[0])) {
		t.Errorf("session user %q, logged in as %q", us.UserName, r.Username)
	}
	if active, err := m.SessionIsActive(ctx); err != nil || !active {
		t.Errorf("SessionIsActive: %v %v", active, err)
	}
	if err := m.Logout(ctx); err != nil {
		t.Fatalf("Logout: %v", err)
	}
	if us, err := m.UserSession(ctx); err != nil || us != nil {
		t.Errorf("after Logout: UserSession %+v %v, want none", us, err)
	}

	// Without the CA the certificate does not verify (the CCM's insecureFlag=false).
	u, _ := soap.ParseURL(r.URL)
	plain := soap.NewClient(u, false)
	plain.DefaultTransport().TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if _, err := vim25.NewClient(ctx, plain); err == nil {
		t.Errorf("connecting without the mock's CA succeeded")
	}
}

// The datacenter list (vclib GetAllDatacenter), every VM's BIOS UUID through a container
// view, FindByUuid for each (upper case too, as node system UUIDs come), FindByIp and
// FindAllByDnsName, and the VM properties config/summary/guest the CCM reads.
func TestFindVMsAndProperties(t *testing.T) {
	r := loadReady(t)
	ctx := judgekit.Context(t)
	c := loggedIn(t, ctx, r)

	finder := find.NewFinder(c, false)
	dcs, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		t.Fatalf("DatacenterList: %v", err)
	}
	if len(dcs) == 0 {
		t.Fatal("no datacenters")
	}
	dc := dcs[0]
	if dc.InventoryPath == "" || dc.Name() == "" {
		t.Errorf("datacenter %+v has no inventory path", dc)
	}
	if _, err := finder.Datacenter(ctx, dc.InventoryPath); err != nil {
		t.Errorf("Finder.Datacenter(%s): %v", dc.InventoryPath, err)
	}

	mgr := view.NewManager(c)
	cv, err := mgr.CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatalf("CreateContainerView: %v", err)
	}
	var vms []mo.VirtualMachine
	if err := cv.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.uuid", "summary"}, &vms); err != nil {
		t.Fatalf("ContainerView.Retrieve: %v", err)
	}
	if err := cv.Destroy(ctx); err != nil {
		t.Errorf("ContainerView.Destroy: %v", err)
	}
	if len(vms) < 3 {
		t.Fatalf("%d VMs, want the 3 seeded nodes", len(vms))
	}

	si := object.NewSearchIndex(c)
	pc := property.DefaultCollector(c)
	for _, v := range vms {
		if v.Config == nil || v.Config.Uuid == "" {
			t.Errorf("VM %s: no config.uuid", v.Name)
			continue
		}
		for _, uuid := range []string{v.Config.Uuid, strings.ToUpper(v.Config.Uuid)} {
			ref, err := si.FindByUuid(ctx, dc, uuid, true, nil)
			if err != nil {
				t.Fatalf("FindByUuid(%s): %v", uuid, err)
			}
			if ref == nil || ref.Reference() != v.Self {
				t.Errorf("FindByUuid(%s) = %v, want %v", uuid, ref, v.Self)
			}
		}

		vm := object.NewVirtualMachine(c, v.Self)
		var o mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config", "summary", "guest"}, &o); err != nil {
			t.Fatalf("VirtualMachine.Properties config,summary,guest: %v", err)
		}
		if o.Config == nil || o.Config.Uuid != v.Config.Uuid || o.Config.InstanceUuid == "" || o.Config.Name != v.Name ||
			o.Config.Hardware.NumCPU == 0 || o.Config.Hardware.MemoryMB == 0 || o.Config.GuestId == "" {
			t.Errorf("VM %s config: %+v", v.Name, o.Config)
		}
		if o.Summary.Config.Uuid != v.Config.Uuid || o.Summary.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn ||
			o.Summary.Runtime.Host == nil || o.Summary.Config.Name != v.Name {
			t.Errorf("VM %s summary: %+v", v.Name, o.Summary)
		}
		if o.Guest == nil || o.Guest.HostName == "" || o.Guest.IpAddress == "" || len(o.Guest.Net) == 0 ||
			o.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
			t.Fatalf("VM %s guest: %+v", v.Name, o.Guest)
		}
		nic := o.Guest.Net[0]
		if nic.MacAddress == "" || len(nic.IpAddress) == 0 || nic.Network == "" {
			t.Errorf("VM %s guest.net[0]: %+v", v.Name, nic)
		}

		// The other ways the CCM finds a node: by IP and by DNS name.
		ref, err := si.FindByIp(ctx, dc, o.Guest.IpAddress, true)
		if err != nil || ref == nil || ref.Reference() != v.Self {
			t.Errorf("FindByIp(%s) = %v, %v", o.Guest.IpAddress, ref, err)
		}
		refs, err := si.FindAllByDnsName(ctx, dc, o.Guest.HostName, true)
		if err != nil || len(refs) != 1 || refs[0].Reference() != v.Self {
			t.Errorf("FindAllByDnsName(%s) = %v, %v", o.Guest.HostName, refs, err)
		}

		// The zone lookup reads the VM's host summary.
		var host mo.HostSystem
		if err := pc.RetrieveOne(ctx, *o.Summary.Runtime.Host, []string{"summary", "name"}, &host); err != nil {
			t.Fatalf("host %v summary: %v", o.Summary.Runtime.Host, err)
		}
		if host.Name == "" || host.Summary.Host == nil || *host.Summary.Host != *o.Summary.Runtime.Host {
			t.Errorf("host summary %+v", host.Summary)
		}
	}

	ref, err := si.FindByUuid(ctx, dc, "00000000-0000-0000-0000-00000000dead", true, nil)
	if err != nil || ref != nil {
		t.Errorf("FindByUuid of an unknown UUID: %v %v, want nil, nil", ref, err)
	}
	instance := true
	v := vms[0]
	var o mo.VirtualMachine
	if err := pc.RetrieveOne(ctx, v.Self, []string{"config.instanceUuid"}, &o); err != nil {
		t.Fatalf("config.instanceUuid: %v", err)
	}
	ref, err = si.FindByUuid(ctx, dc, o.Config.InstanceUuid, true, &instance)
	if err != nil || ref == nil || ref.Reference() != v.Self {
		t.Errorf("FindByUuid(instanceUuid=true, %s) = %v, %v", o.Config.InstanceUuid, ref, err)
	}

	// Several VMs in one Retrieve (the CCM's GetVMMoList), and a VM that is not there.
	var refs []types.ManagedObjectReference
	for _, v := range vms {
		refs = append(refs, v.Self)
	}
	var many []mo.VirtualMachine
	if err := pc.Retrieve(ctx, refs, []string{"summary", "guest.hostName"}, &many); err != nil {
		t.Fatalf("PropertyCollector.Retrieve of %d VMs: %v", len(refs), err)
	}
	if len(many) != len(refs) {
		t.Errorf("Retrieve of %d VMs gave %d", len(refs), len(many))
	}
	var gone mo.VirtualMachine
	err = pc.RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-999999"}, []string{"summary"}, &gone)
	if !fault.Is(err, &types.ManagedObjectNotFound{}) {
		t.Errorf("properties of a missing VM: %v, want ManagedObjectNotFound", err)
	}
}
