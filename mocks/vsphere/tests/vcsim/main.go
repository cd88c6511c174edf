// A minimal vcsim for side-by-side tests: builds the simulator's VPX inventory, serves it
// over HTTPS with vAPI endpoints registered, prints the /sdk URL on stdout and runs until
// stdin closes. Built from Debian's govmomi simulator library (GOPATH mode, no network).
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
