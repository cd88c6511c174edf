package judge

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Flows the upstream CCM (cloud-provider-azure v1.36.5) was seen to take against the mock
// that the tests above do not cover; each failed there before (/tmp findings of the
// integration, issue 16).

// TestPrivateLinkServicesList: on every frontend deletion the CCM lists the resource
// group's private link services (pkg/provider/azure_privatelinkservice.go); ARM knows the
// type and answers an empty list, not 404 InvalidResourceType.
func TestPrivateLinkServicesList(t *testing.T) {
	r := loadReady(t)
	f, err := armnetwork.NewClientFactory(r.SubscriptionID, secretCredential(t, r), armOptions(t, r))
	if err != nil {
		t.Fatal(err)
	}
	pager := f.NewPrivateLinkServicesClient().NewListPager(r.ResourceGroup, nil)
	for pager.More() {
		if _, err := pager.NextPage(ctxFor(t)); err != nil {
			t.Fatalf("listing privateLinkServices: %v", err)
		}
	}
}

// TestDeletingALoadBalancerReleasesItsPoolMembers: the CCM deletes its last load balancer
// without first taking the NICs out of its pool (pkg/provider/azure_loadbalancer.go
// safeDeleteLoadBalancer went straight to DELETE in this flow), and for the next Service
// reads each NIC, adds the new pool and writes it back. ARM lets that write through (it
// disassociates a deleted load balancer's pool members), so a NIC read after the delete
// must be writable as read.
func TestDeletingALoadBalancerReleasesItsPoolMembers(t *testing.T) {
	r := loadReady(t)
	n := networkClients(t, r)
	ctx := ctxFor(t)
	lbName := uniqueName("judge-release")
	lbID := resourceID(r, "Microsoft.Network", "loadBalancers", lbName)
	subnetID := resourceID(r, "Microsoft.Network", "virtualNetworks", r.VnetName) + "/subnets/" + r.SubnetName
	p, err := n.lbs.BeginCreateOrUpdate(ctx, r.ResourceGroup, lbName, armnetwork.LoadBalancer{
		Location: to.Ptr(r.Location),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name: to.Ptr("fe"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
					Subnet:                    &armnetwork.Subnet{ID: to.Ptr(subnetID)},
					PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
				},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}},
		},
	}, nil)
	if err != nil {
		t.Fatalf("creating an internal load balancer: %v", err)
	}
	if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("creating an internal load balancer: %v", err)
	}
	lbDeleted := false
	t.Cleanup(func() {
		if !lbDeleted {
			if d, err := n.lbs.BeginDelete(ctxFor(t), r.ResourceGroup, lbName, nil); err == nil {
				_, _ = d.PollUntilDone(ctxFor(t), nil)
			}
		}
	})

	vms := listVMs(t, r)
	if len(vms) == 0 {
		t.Fatal("no VMs")
	}
	nicID := *vms[len(vms)-1].Properties.NetworkProfile.NetworkInterfaces[0].ID
	nicName := nicID[strings.LastIndex(nicID, "/")+1:]
	putNIC := func(nic armnetwork.Interface) error {
		p, err := n.nics.BeginCreateOrUpdate(ctx, r.ResourceGroup, nicName, nic, nil)
		if err != nil {
			return err
		}
		_, err = p.PollUntilDone(ctx, nil)
		return err
	}
	got, err := n.nics.Get(ctx, r.ResourceGroup, nicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	ipc := got.Properties.IPConfigurations[0].Properties
	original := append([]*armnetwork.BackendAddressPool(nil), ipc.LoadBalancerBackendAddressPools...)
	ipc.LoadBalancerBackendAddressPools = append(original, &armnetwork.BackendAddressPool{ID: to.Ptr(lbID + "/backendAddressPools/pool")})
	if err := putNIC(got.Interface); err != nil {
		t.Fatalf("joining the pool: %v", err)
	}
	// Restore the NIC whatever happens (without any reference to the deleted pool).
	t.Cleanup(func() {
		cur, err := n.nics.Get(ctxFor(t), r.ResourceGroup, nicName, nil)
		if err != nil {
			t.Errorf("re-reading NIC %s: %v", nicName, err)
			return
		}
		cur.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = original
		if err := putNIC(cur.Interface); err != nil {
			t.Errorf("restoring NIC %s: %v", nicName, err)
		}
	})

	d, err := n.lbs.BeginDelete(ctx, r.ResourceGroup, lbName, nil)
	if err != nil {
		t.Fatalf("deleting the load balancer its pool members still name: %v", err)
	}
	if _, err := d.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("deleting the load balancer: %v", err)
	}
	lbDeleted = true

	after, err := n.nics.Get(ctx, r.ResourceGroup, nicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := putNIC(after.Interface); err != nil {
		t.Fatalf("a NIC read after its load balancer was deleted cannot be written back as read: %v", err)
	}
}
