// Package deploy holds what runs svcgw where operators run things: the
// Kubernetes manifests (kubernetes/), the systemd unit (systemd/) and the
// container image's builder (image/, a module of its own). Its tests check
// the manifests against the Kubernetes API's schemas and the unit with
// systemd-analyze; scripts/release-check checks the image.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/svcgw/svcgw/cli"
	"github.com/svcgw/svcgw/config"
)

// kubernetesModule is where the schemas come from: the Kubernetes
// repository's api/openapi-spec/swagger.json (the API's OpenAPI v2
// definitions), in its Go module, which the Go module proxy serves (an
// 18 MB download, once per module cache). No cluster is needed.
const kubernetesModule = "k8s.io/kubernetes@v1.34.2"

var (
	schemaOnce sync.Once
	schemaDoc  map[string]any
	schemaErr  error
)

// k8sSchemas are the definitions of swagger.json, made strict as
// kubeconform's -strict is (an object's unknown field is an error) and
// with the two types whose wire form is not what the document says
// (int-or-string, quantities) opened to both.
func k8sSchemas(t *testing.T) map[string]any {
	t.Helper()
	schemaOnce.Do(func() {
		out, err := exec.Command("go", "mod", "download", "-json", kubernetesModule).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s%s", err, ee.Stderr, out)
			}
			schemaErr = fmt.Errorf("go mod download %s: %w", kubernetesModule, err)
			return
		}
		var mod struct{ Dir string }
		if err := json.Unmarshal(out, &mod); err != nil {
			schemaErr = err
			return
		}
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "api", "openapi-spec", "swagger.json"))
		if err != nil {
			schemaErr = err
			return
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			schemaErr = err
			return
		}
		defs := doc["definitions"].(map[string]any)
		for _, d := range defs {
			strict(d)
		}
		defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = map[string]any{"type": []any{"string", "integer"}}
		defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"type": []any{"string", "number"}}
		schemaDoc = map[string]any{"definitions": defs}
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schemaDoc
}

// strict forbids properties a schema does not name, in it and the
// schemas it holds.
func strict(v any) {
	switch s := v.(type) {
	case map[string]any:
		if props, ok := s["properties"].(map[string]any); ok {
			if _, set := s["additionalProperties"]; !set {
				s["additionalProperties"] = false
			}
			for _, p := range props {
				strict(p)
			}
		}
		if items, ok := s["items"]; ok {
			strict(items)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			strict(ap)
		}
	case []any:
		for _, x := range s {
			strict(x)
		}
	}
}

// definitionOf is the name of the definition of apiVersion and kind, from
// the definitions' x-kubernetes-group-version-kind.
func definitionOf(defs map[string]any, apiVersion, kind string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	for name, d := range defs {
		gvks, _ := d.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			g := g.(map[string]any)
			if g["group"] == group && g["version"] == version && g["kind"] == kind {
				return name
			}
		}
	}
	return ""
}

// object is one document of a manifest.
type object struct {
	file string
	doc  map[string]any
}

func (o object) kind() string { s, _ := o.doc["kind"].(string); return s }
func (o object) name() string {
	m, _ := o.doc["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

// manifests reads every document of the YAML files under kubernetes/.
func manifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in kubernetes/: %v", err)
	}
	all := map[string][]object{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc == nil {
				continue
			}
			// Through JSON, as kubectl sends it: YAML's maps become JSON's.
			j, err := json.Marshal(doc)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var obj map[string]any
			if err := json.Unmarshal(j, &obj); err != nil {
				t.Fatal(err)
			}
			all[f] = append(all[f], object{file: f, doc: obj})
		}
	}
	return all
}

func TestKubernetes_EveryObjectMatchesTheAPISchema(t *testing.T) {
	doc := k8sSchemas(t)
	defs := doc["definitions"].(map[string]any)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4) // OpenAPI v2's schemas are draft 4's
	if err := c.AddResource("k8s.json", doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for file, objs := range manifests(t) {
		for _, o := range objs {
			api, _ := o.doc["apiVersion"].(string)
			def := definitionOf(defs, api, o.kind())
			if def == "" {
				t.Errorf("%s: %s %s: no %s %s in Kubernetes %s", file, o.kind(), o.name(), api, o.kind(), kubernetesModule)
				continue
			}
			sch, err := c.Compile("k8s.json#/definitions/" + def)
			if err != nil {
				t.Fatalf("%s: %v", def, err)
			}
			if err := sch.Validate(o.doc); err != nil {
				t.Errorf("%s: %s %s: %v", file, o.kind(), o.name(), err)
				continue
			}
			n++
		}
	}
	t.Logf("%d objects valid against %s's schemas", n, kubernetesModule)
}

// TestKubernetes_TheSchemaCheckCatchesMistakes: the check above fails on
// the usual mistakes, so its passing means something.
func TestKubernetes_TheSchemaCheckCatchesMistakes(t *testing.T) {
	doc := k8sSchemas(t)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("k8s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("k8s.json#/definitions/" + definitionOf(doc["definitions"].(map[string]any), "apps/v1", "Deployment"))
	if err != nil {
		t.Fatal(err)
	}
	for name, y := range map[string]string{
		"a misspelt field":       "spec: {replica: 1, selector: {}, template: {spec: {containers: [{name: a, image: b}]}}}",
		"a string for a number":  "spec: {replicas: one, selector: {}, template: {spec: {containers: [{name: a, image: b}]}}}",
		"a container's nameless": "spec: {selector: {}, template: {spec: {containers: [{image: b}]}}}",
		"a probe's port missing": "spec: {selector: {}, template: {spec: {containers: [{name: a, image: b, readinessProbe: {httpGet: {path: /readyz}}}]}}}",
	} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(y), &obj); err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(obj)
		var v any
		_ = json.Unmarshal(j, &v)
		if err := sch.Validate(v); err == nil {
			t.Errorf("%s passed the schema", name)
		}
	}
}

// deployment is a manifest's Deployment and its (first) container.
func deployment(t *testing.T, objs []object) (dep, ctr map[string]any) {
	t.Helper()
	for _, o := range objs {
		if o.kind() == "Deployment" {
			dep = o.doc
			ctrs := dig(dep, "spec", "template", "spec", "containers").([]any)
			return dep, ctrs[0].(map[string]any)
		}
	}
	t.Fatal("no Deployment")
	return nil, nil
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func TestKubernetes_TheManifestsRunSvcgwAsDocumented(t *testing.T) {
	serveHelp := help(t, "serve")
	for file, objs := range manifests(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			dep, ctr := deployment(t, objs)
			replicas := dig(dep, "spec", "replicas").(float64)
			db := ""
			for _, e := range ctr["env"].([]any) {
				e := e.(map[string]any)
				if e["name"] == "SVCGW_DB" {
					if v, ok := e["value"].(string); ok {
						db = v
					} else if ref := dig(e, "valueFrom", "secretKeyRef", "name"); ref != nil {
						db = "secret:" + ref.(string)
					}
				}
			}
			switch {
			case strings.HasPrefix(db, "/data/"):
				// SQLite: one replica, never two at once, on a claim.
				if replicas != 1 || dig(dep, "spec", "strategy", "type") != "Recreate" {
					t.Errorf("SQLite with %v replicas, strategy %v: want 1, Recreate", replicas, dig(dep, "spec", "strategy", "type"))
				}
				if !slices.ContainsFunc(dig(dep, "spec", "template", "spec", "volumes").([]any), func(v any) bool {
					return dig(v, "persistentVolumeClaim", "claimName") != nil
				}) {
					t.Error("SQLite without a PersistentVolumeClaim")
				}
			case strings.HasPrefix(db, "secret:"):
				if replicas < 2 {
					t.Errorf("PostgreSQL with %v replicas: the point is several", replicas)
				}
			default:
				t.Errorf("SVCGW_DB is %q: want a /data/ file or a Secret's URL", db)
			}
			if dig(ctr, "readinessProbe", "httpGet", "path") != "/readyz" || dig(ctr, "livenessProbe", "httpGet", "path") != "/healthz" {
				t.Errorf("probes %v, %v: want readiness /readyz, liveness /healthz", ctr["readinessProbe"], ctr["livenessProbe"])
			}
			// Every argument is a flag of serve, the configuration comes
			// from a ConfigMap that loads, and it is reloaded.
			args := ctr["args"].([]any)
			if args[0] != "serve" {
				t.Errorf("args %v: want serve first", args)
			}
			var cfgPath string
			for _, a := range args[1:] {
				flag, val, _ := strings.Cut(a.(string), "=")
				if !strings.Contains(serveHelp, "  "+flag+"=") && !strings.Contains(serveHelp, "  "+flag+" ") {
					t.Errorf("%s is not a flag of svcgw serve", flag)
				}
				if flag == "--config" {
					cfgPath = val
				}
			}
			if !slices.Contains(args, any("--reload-interval=10s")) {
				t.Errorf("args %v: the ConfigMap's edits need --reload-interval to be reloaded", args)
			}
			checkConfigMap(t, objs, dig(dep, "spec", "template", "spec", "volumes").([]any), ctr, cfgPath)
			checkServices(t, objs)
		})
	}
}

func checkConfigMap(t *testing.T, objs []object, volumes []any, ctr map[string]any, cfgPath string) {
	t.Helper()
	dir, file := filepath.Split(cfgPath)
	var cmName string
	for _, m := range ctr["volumeMounts"].([]any) {
		if filepath.Clean(dig(m, "mountPath").(string)) == filepath.Clean(dir) {
			for _, v := range volumes {
				if dig(v, "name") == dig(m, "name") {
					cmName, _ = dig(v, "configMap", "name").(string)
				}
			}
		}
	}
	if cmName == "" {
		t.Fatalf("--config=%s is not on a ConfigMap's volume", cfgPath)
	}
	for _, o := range objs {
		if o.kind() == "ConfigMap" && o.name() == cmName {
			text, _ := dig(o.doc, "data", file).(string)
			if text == "" {
				t.Fatalf("ConfigMap %s has no %s", cmName, file)
			}
			if _, err := config.Load([]byte(text), func(string) (string, bool) { return "", false }); err != nil {
				t.Errorf("ConfigMap %s's %s does not load: %v", cmName, file, err)
			}
			return
		}
	}
	t.Errorf("no ConfigMap %s", cmName)
}

// checkServices: the callers' Service has the caller port only; the admin
// port has a Service of its own.
func checkServices(t *testing.T, objs []object) {
	t.Helper()
	ports := map[string][]string{}
	for _, o := range objs {
		if o.kind() != "Service" {
			continue
		}
		for _, p := range dig(o.doc, "spec", "ports").([]any) {
			ports[o.name()] = append(ports[o.name()], fmt.Sprint(dig(p, "targetPort")))
		}
	}
	if !slices.Equal(ports["svcgw"], []string{"http"}) || !slices.Equal(ports["svcgw-admin"], []string{"admin"}) {
		t.Errorf("Services' target ports %v: want svcgw [http], svcgw-admin [admin]", ports)
	}
}

// help is svcgw's --help of a command.
func help(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if code := cli.Run(context.Background(), append(args, "--help"), &out, &out); code != 0 {
		t.Fatalf("svcgw %v --help: %d: %s", args, code, out.String())
	}
	return out.String()
}

// TestSystemd_UnitVerifies runs systemd-analyze verify on the unit, in a
// root of its own holding the unit, systemd's own units and an executable
// where ExecStart and ExecReload point, so that nothing of this machine's
// but systemd-analyze is needed. Any line it prints is a failure: it
// reports unknown keys and bad values and still exits 0.
func TestSystemd_UnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on this machine (apt-get install systemd)")
	}
	unit, err := os.ReadFile("systemd/svcgw.service")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	units, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	if err != nil || len(units) == 0 {
		t.Skip("no systemd units in /usr/lib/systemd/system")
	}
	copyFile := func(src, dst string, mode os.FileMode) {
		t.Helper()
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range units {
		copyFile(u, filepath.Join(root, u), 0o644)
	}
	exe := regexp.MustCompile(`(?m)^Exec\w+=(/\S+)`)
	for _, m := range exe.FindAllSubmatch(unit, -1) {
		copyFile("/bin/true", filepath.Join(root, string(m[1])), 0o755)
	}
	copyFile("systemd/svcgw.service", filepath.Join(root, "etc/systemd/system/svcgw.service"), 0o644)
	out, err := exec.Command(analyze, "verify", "--root="+root, "/etc/systemd/system/svcgw.service").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The settings it passes are svcgw's.
	serveHelp := help(t, "serve")
	env := regexp.MustCompile(`(?m)^Environment=(SVCGW_\w+)=`)
	for _, m := range env.FindAllSubmatch(unit, -1) {
		if !strings.Contains(serveHelp, "$"+string(m[1])) {
			t.Errorf("the unit sets %s, which svcgw serve does not read", m[1])
		}
	}
}
