module ccm-conformance.invalid/vcsim

go 1.26

require github.com/vmware/govmomi v0.53.0

require github.com/google/uuid v1.6.0 // indirect
