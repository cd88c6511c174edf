// The main package ccm-conformance generates for the upstream GCE cloud provider.
//
// k8s.io/cloud-provider-gcp's own main (cmd/cloud-controller-manager) lives in a module the
// Go module proxy here does not serve; its nested module k8s.io/cloud-provider-gcp/providers
// is served at v0.28.2, and its gce package registers the "gce" provider with
// k8s.io/cloud-provider. This main starts that provider the way upstream's main does:
// k8s.io/cloud-provider's app command with its default controllers and aliases, and a cloud
// initializer that refuses a cloud without a cluster id unless --allow-untagged-cloud
// (cloud-provider-gcp cmd/cloud-controller-manager/main.go, cloudInitializer).
//
// What upstream's main adds and this one leaves out: the nodeipam controller (it imports
// k8s.io/kubernetes; the harness gives nodes their pod CIDRs), the GKE-only controllers
// (gkenetworkparamset, the GKE service and tenant controllers, disabled by default
// upstream) and the GCE flags that gate them.
package main

import (
	"os"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/klog/v2"

	_ "k8s.io/cloud-provider-gcp/providers/gce"
)

func main() {
	pflag.CommandLine.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	// k8s.io/cloud-provider v0.28 listens on the webhook port (10260, every interface) even
	// when no webhook is enabled, so two of these on one machine collide; from v1.29 on it
	// does not bind without an enabled webhook (options/webhook.go, ApplyTo). The gce
	// provider has no webhook: default the port to 0 ("don't serve") as the later releases
	// behave. --webhook-secure-port still overrides it.
	opts.WebhookServing.BindPort = 0
	command := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}

func initCloud(config *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	shared := config.ComponentConfig.KubeCloudShared
	cloud, err := cloudprovider.InitCloudProvider(shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile)
	if err != nil {
		klog.Fatalf("cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("cloud provider %q is not registered", shared.CloudProvider.Name)
	}
	if !cloud.HasClusterID() {
		if !shared.AllowUntaggedCloud {
			klog.Fatalf("no ClusterID found; set --allow-untagged-cloud to run without one")
		}
		klog.Warning("detected a cluster without a ClusterID")
	}
	return cloud
}
