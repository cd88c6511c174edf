module ccm-conformance.invalid/judges/openstack

go 1.26

require github.com/gophercloud/gophercloud/v2 v2.12.0
