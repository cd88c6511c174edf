module ccm-conformance.invalid/judges/vsphere

go 1.26

require github.com/vmware/govmomi v0.53.0

require github.com/google/uuid v1.6.0 // indirect

require ccm-conformance.invalid/judges/judgekit v0.0.0

replace ccm-conformance.invalid/judges/judgekit => ../judgekit
