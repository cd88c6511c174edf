module ccm-conformance.invalid/judges/openstack

go 1.26

require github.com/gophercloud/gophercloud/v2 v2.12.0

require ccm-conformance.invalid/judges/judgekit v0.0.0

replace ccm-conformance.invalid/judges/judgekit => ../judgekit
