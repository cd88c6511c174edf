// A minimal vcsim for side-by-side tests: builds the simulator's VPX inventory (vcsim's
// default model, `simulator.VPX()`), serves it over HTTPS with vAPI endpoints registered,
// prints the /sdk URL on stdout and runs until stdin closes.
//
// Built against govmomi v0.53.0 (the version vsphere-cloud-controller-manager v1.36.0
// pins) from the Go module proxy. Why this wrapper rather than
// `go install github.com/vmware/govmomi/vcsim@v0.53.0`: vcsim's command is a nested module
// (`vcsim/go.mod`) that the proxy does not serve at that version (404), and the
// govmomi v0.53.0 module zip leaves the directory out; its simulator library is in the
// module, and this is the same model vcsim serves. tests/support/mod.rs builds it into
// $XDG_CACHE_HOME/ccm-conformance/vcsim-v0.53.0/.
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"os"

	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		os.Exit(1)
	}
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	server := model.Service.NewServer()
	fmt.Println(server.URL.String())
	// Block until the parent closes stdin.
	bufio.NewReader(os.Stdin).ReadString('\n')
	server.Close()
	model.Remove()
}
