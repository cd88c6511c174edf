// The Sonobuoy plugin definition (ci/sonobuoy/ccm-conformance.yaml) judged by Sonobuoy's
// own plugin loader at the version pinned in go.mod: it must load as the plugin
// `sonobuoy run --plugin ci/sonobuoy/ccm-conformance.yaml` would start, a Job whose pod
// runs the harness in-cluster and reports JUnit where Sonobuoy collects it.
package sonobuoy

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vmware-tanzu/sonobuoy/pkg/plugin"
	"github.com/vmware-tanzu/sonobuoy/pkg/plugin/loader"
)

func pluginDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "ci", "sonobuoy")
}

func TestThePluginLoadsAsAJobReportingJUnit(t *testing.T) {
	file := filepath.Join(pluginDir(t), "ccm-conformance.yaml")
	def, err := loader.LoadDefinitionFromFile(file)
	if err != nil {
		t.Fatalf("Sonobuoy cannot load %s: %v", file, err)
	}
	cfg := def.SonobuoyConfig
	if cfg.PluginName != "ccm-conformance" || !strings.EqualFold(cfg.Driver, "Job") {
		t.Fatalf("plugin %q with driver %q, want ccm-conformance run as a Job", cfg.PluginName, cfg.Driver)
	}
	if cfg.ResultFormat != "junit" {
		t.Fatalf("result-format %q, want junit (Sonobuoy reads the harness's JUnit)", cfg.ResultFormat)
	}
	script := strings.Join(append(append([]string{}, def.Spec.Command...), def.Spec.Args...), " ")
	for _, want := range []string{"ccm-conformance run", "--kubeconfig in-cluster", "/tmp/sonobuoy/results", "done"} {
		if !strings.Contains(script, want) {
			t.Errorf("the container's command lacks %q: %s", want, script)
		}
	}

	// What `sonobuoy run --plugin` does with it: every plugin of the directory loaded
	// through its driver, this one selected by name.
	plugins, err := loader.LoadAllPlugins("sonobuoy", "sonobuoy/sonobuoy:v0.57.3", "IfNotPresent", "", nil,
		[]string{pluginDir(t)}, []plugin.Selection{{Name: "ccm-conformance"}})
	if err != nil {
		t.Fatalf("LoadAllPlugins: %v", err)
	}
	if len(plugins) != 1 {
		t.Fatalf("%d plugins loaded, want 1", len(plugins))
	}
	p := plugins[0]
	if p.GetName() != "ccm-conformance" || p.GetResultFormat() != "junit" {
		t.Fatalf("loaded %q (%s)", p.GetName(), p.GetResultFormat())
	}
}
