package judge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
)

func vmClient(t *testing.T, r ready) *armcompute.VirtualMachinesClient {
	t.Helper()
	c, err := armcompute.NewVirtualMachinesClient(r.SubscriptionID, secretCredential(t, r), armOptions(t, r))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// listVMs pages through the resource group's VMs with the SDK's pager (nextLink).
func listVMs(t *testing.T, r ready) []*armcompute.VirtualMachine {
	t.Helper()
	ctx := ctxFor(t)
	pager := vmClient(t, r).NewListPager(r.ResourceGroup, nil)
	var vms []*armcompute.VirtualMachine
	for pages := 0; pager.More(); pages++ {
		if pages > 100 {
			t.Fatal("more than 100 pages of VMs: nextLink never ends")
		}
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("listing VMs: %v", err)
		}
		vms = append(vms, page.Value...)
	}
	return vms
}

// TestProviderRegistration: the CCM reads Microsoft.Compute's registration at start for
// the zones of each region (cloud-provider-azure pkg/azclient/providerclient/custom.go
// GetVirtualMachineSupportedZones), dereferencing resourceType and each zone mapping's
// location without a nil check, and dies at start if the call fails.
func TestProviderRegistration(t *testing.T) {
	r := loadReady(t)
	c, err := armresources.NewProvidersClient(r.SubscriptionID, secretCredential(t, r), armOptions(t, r))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"Microsoft.Compute", "Microsoft.Network"} {
		resp, err := c.Get(ctxFor(t), ns, nil)
		if err != nil {
			t.Fatalf("Providers.Get(%s): %v", ns, err)
		}
		if resp.Namespace == nil || !strings.EqualFold(*resp.Namespace, ns) {
			t.Errorf("%s: namespace %v", ns, resp.Namespace)
		}
		if len(resp.ResourceTypes) == 0 {
			t.Errorf("%s: no resourceTypes", ns)
		}
		for _, rt := range resp.ResourceTypes {
			if rt.ResourceType == nil {
				t.Fatalf("%s: a resourceType entry without resourceType (the CCM dereferences it)", ns)
			}
			for _, zm := range rt.ZoneMappings {
				if zm.Location == nil {
					t.Fatalf("%s/%s: a zoneMapping without location (the CCM dereferences it)", ns, *rt.ResourceType)
				}
			}
		}
	}
}

// TestListVirtualMachines: the mock starts with nodes; each VM is a full ARM resource.
func TestListVirtualMachines(t *testing.T) {
	r := loadReady(t)
	vms := listVMs(t, r)
	if len(vms) == 0 {
		t.Fatal("no VMs listed (the mock is started with nodes)")
	}
	seen := map[string]bool{}
	for _, vm := range vms {
		if vm.Name == nil || vm.ID == nil || vm.Location == nil || vm.Type == nil {
			t.Fatalf("VM without name/id/location/type: %+v", vm)
		}
		if seen[*vm.Name] {
			t.Errorf("VM %s listed twice (paging repeats an item)", *vm.Name)
		}
		seen[*vm.Name] = true
		if !sameID(*vm.ID, resourceID(r, "Microsoft.Compute", "virtualMachines", *vm.Name)) {
			t.Errorf("VM id %s", *vm.ID)
		}
		if *vm.Type != "Microsoft.Compute/virtualMachines" {
			t.Errorf("VM type %s", *vm.Type)
		}
		if !strings.EqualFold(strings.ReplaceAll(*vm.Location, " ", ""), r.Location) {
			t.Errorf("VM %s location %s, want %s", *vm.Name, *vm.Location, r.Location)
		}
		p := vm.Properties
		if p == nil || p.NetworkProfile == nil || len(p.NetworkProfile.NetworkInterfaces) == 0 {
			t.Errorf("VM %s has no networkProfile.networkInterfaces (the CCM finds node IPs through them)", *vm.Name)
		}
		if p != nil && p.HardwareProfile != nil && p.HardwareProfile.VMSize == nil {
			t.Errorf("VM %s has a hardwareProfile without vmSize", *vm.Name)
		}
	}
}

// TestListVirtualMachinesWithInstanceView: the CCM lists VMs with `$expand=instanceView`
// (cloud-provider-azure pkg/azclient/virtualmachineclient/custom.go List), so every listed
// VM carries its statuses.
func TestListVirtualMachinesWithInstanceView(t *testing.T) {
	r := loadReady(t)
	pager := vmClient(t, r).NewListPager(r.ResourceGroup, &armcompute.VirtualMachinesClientListOptions{
		Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView),
	})
	n := 0
	for pager.More() {
		page, err := pager.NextPage(ctxFor(t))
		if err != nil {
			t.Fatalf("listing VMs with $expand=instanceView: %v", err)
		}
		for _, vm := range page.Value {
			n++
			if vm.Properties == nil || vm.Properties.InstanceView == nil {
				t.Fatalf("VM %v listed with $expand=instanceView has no instanceView", vm.Name)
			}
			checkStatuses(t, *vm.Name, vm.Properties.InstanceView.Statuses)
		}
	}
	if n == 0 {
		t.Fatal("no VMs")
	}
}

// TestGetVirtualMachineInstanceView: `$expand=instanceView` adds the statuses the CCM reads
// for power and provisioning state (pkg/provider/azure_standard.go getPowerStatus /
// getProvisioningState), and GET .../instanceView answers the same.
func TestGetVirtualMachineInstanceView(t *testing.T) {
	r := loadReady(t)
	vms := listVMs(t, r)
	if len(vms) == 0 {
		t.Fatal("no VMs")
	}
	name := *vms[0].Name
	c := vmClient(t, r)
	ctx := ctxFor(t)
	got, err := c.Get(ctx, r.ResourceGroup, name, &armcompute.VirtualMachinesClientGetOptions{
		Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView),
	})
	if err != nil {
		t.Fatalf("Get(%s, instanceView): %v", name, err)
	}
	if got.Properties == nil || got.Properties.InstanceView == nil {
		t.Fatalf("Get(%s, $expand=instanceView) has no properties.instanceView", name)
	}
	checkStatuses(t, name, got.Properties.InstanceView.Statuses)

	plain, err := c.Get(ctx, r.ResourceGroup, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Properties != nil && plain.Properties.InstanceView != nil {
		t.Errorf("Get(%s) without $expand carries an instanceView", name)
	}

	iv, err := c.InstanceView(ctx, r.ResourceGroup, name, nil)
	if err != nil {
		t.Fatalf("InstanceView(%s): %v", name, err)
	}
	checkStatuses(t, name, iv.Statuses)

	_, err = c.Get(ctx, r.ResourceGroup, "no-such-vm", nil)
	responseError(t, err, http.StatusNotFound, "ResourceNotFound")
}

func checkStatuses(t *testing.T, name string, statuses []*armcompute.InstanceViewStatus) {
	t.Helper()
	var prov, power string
	for _, s := range statuses {
		if s == nil || s.Code == nil {
			t.Fatalf("%s: a status without code", name)
		}
		switch {
		case strings.HasPrefix(*s.Code, "ProvisioningState/"):
			prov = *s.Code
		case strings.HasPrefix(*s.Code, "PowerState/"):
			power = *s.Code
		}
	}
	if prov != "ProvisioningState/succeeded" {
		t.Errorf("%s: provisioning status %q, want ProvisioningState/succeeded", name, prov)
	}
	switch power {
	case "PowerState/running", "PowerState/stopped", "PowerState/deallocated":
	default:
		t.Errorf("%s: power status %q", name, power)
	}
}
