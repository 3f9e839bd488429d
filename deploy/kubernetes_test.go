package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/leaf-id/leaf/config"
	"github.com/leaf-id/leaf/httpapi"
	"github.com/leaf-id/leaf/server/servertest"
)

// manifestDir holds the Kubernetes manifests, relative to this package.
const manifestDir = "kubernetes"

// announceVar sets server.announce_addr: the address the Redis Cluster
// and Sentinel faces give clients, the pod's own.
const announceVar = "LEAF_SERVER_ANNOUNCE_ADDR"

// The parts of the Kubernetes objects the test reads, as the API names
// them.
type (
	object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		Spec       spec              `yaml:"spec"`
		Resources  []string          `yaml:"resources"` // a Kustomization's
		file       string
	}
	spec struct {
		Replicas       *int          `yaml:"replicas"`
		Selector       yaml.Node     `yaml:"selector"` // a label selector, or a Service's labels
		Template       podTemplate   `yaml:"template"`
		Ports          []servicePort `yaml:"ports"`
		MinAvailable   any           `yaml:"minAvailable"` // a number or a percentage
		MaxUnavailable any           `yaml:"maxUnavailable"`
		Type           string        `yaml:"type"`
	}
	podTemplate struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Containers      []container `yaml:"containers"`
			Volumes         []volume    `yaml:"volumes"`
			SecurityContext struct {
				RunAsNonRoot *bool `yaml:"runAsNonRoot"`
			} `yaml:"securityContext"`
			TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
		} `yaml:"spec"`
	}
	container struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet *struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"` // a number or a port's name
		} `yaml:"httpGet"`
	}
	volume struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"configMap"`
	}
	servicePort struct {
		Name       string    `yaml:"name"`
		Port       int       `yaml:"port"`
		TargetPort yaml.Node `yaml:"targetPort"`
	}
)

// manifests reads every object of every manifest file; the Kustomization
// apart.
func manifests(t *testing.T) (objs []object, kustomization object) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(false)
		for i := 0; ; i++ {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			o.file = filepath.Base(f)
			if o.Kind == "Kustomization" {
				kustomization = o
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs, kustomization
}

// one is the object of kind; the test fails unless there is exactly one.
func one(t *testing.T, objs []object, kind string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// matchLabels is a label selector's matchLabels (Deployment, PDB) or a
// Service's selector map.
func matchLabels(t *testing.T, o object) map[string]string {
	t.Helper()
	var sel struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	var plain map[string]string
	if o.Kind == "Service" {
		if err := o.Spec.Selector.Decode(&plain); err != nil {
			t.Fatalf("%s %s: selector: %v", o.Kind, o.Metadata.Name, err)
		}
		return plain
	}
	if err := o.Spec.Selector.Decode(&sel); err != nil {
		t.Fatalf("%s %s: selector: %v", o.Kind, o.Metadata.Name, err)
	}
	return sel.MatchLabels
}

// selects: every label of sel is on labels, and sel has one at least.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestManifests: every object has what the API server requires of its
// kind; the Service and the PodDisruptionBudget select the Deployment's
// pods; the Kustomization lists every file.
func TestManifests(t *testing.T) {
	objs, kust := manifests(t)
	apiVersions := map[string]string{
		"Deployment": "apps/v1", "Service": "v1", "PodDisruptionBudget": "policy/v1",
		"ConfigMap": "v1", "Secret": "v1",
	}
	for kind := range apiVersions {
		one(t, objs, kind)
	}
	dep := one(t, objs, "Deployment")
	pods := dep.Spec.Template.Metadata.Labels
	for _, o := range objs {
		t.Run(o.file+"/"+o.Kind, func(t *testing.T) {
			if want, ok := apiVersions[o.Kind]; !ok || o.APIVersion != want {
				t.Errorf("apiVersion %q, kind %q: want one of %v", o.APIVersion, o.Kind, apiVersions)
			}
			if o.Metadata.Name == "" {
				t.Error("no metadata.name")
			}
			switch o.Kind {
			case "Deployment":
				if !selects(matchLabels(t, o), pods) {
					t.Errorf("spec.selector.matchLabels %v does not select the template's labels %v", matchLabels(t, o), pods)
				}
				if len(o.Spec.Template.Spec.Containers) == 0 {
					t.Fatal("no containers")
				}
				for _, c := range o.Spec.Template.Spec.Containers {
					if c.Name == "" || c.Image == "" {
						t.Errorf("container %+v: name and image are required", c.Name)
					}
				}
				if rr := o.Spec.Template.Spec.SecurityContext.RunAsNonRoot; rr == nil || !*rr {
					t.Error("the pod does not require a non-root user (securityContext.runAsNonRoot)")
				}
				// leaf stops within 15 s (giving unused IDs back).
				if g := o.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil && *g < 20 {
					t.Errorf("terminationGracePeriodSeconds %d: leaf needs up to 15 s to stop", *g)
				}
			case "Service":
				if len(o.Spec.Ports) == 0 {
					t.Fatal("no spec.ports")
				}
				if !selects(matchLabels(t, o), pods) {
					t.Errorf("spec.selector %v does not select the Deployment's pods %v", matchLabels(t, o), pods)
				}
				for _, p := range o.Spec.Ports {
					if p.Port < 1 || p.Port > 65535 {
						t.Errorf("port %q: %d", p.Name, p.Port)
					}
					if port(t, dep, p.TargetPort) == 0 {
						t.Errorf("port %q: targetPort %q is no container port", p.Name, p.TargetPort.Value)
					}
				}
			case "PodDisruptionBudget":
				if (o.Spec.MinAvailable == nil) == (o.Spec.MaxUnavailable == nil) {
					t.Error("want one of minAvailable and maxUnavailable")
				}
				if !selects(matchLabels(t, o), pods) {
					t.Errorf("spec.selector %v does not select the Deployment's pods %v", matchLabels(t, o), pods)
				}
				if n, ok := o.Spec.MinAvailable.(int); ok && dep.Spec.Replicas != nil && n >= *dep.Spec.Replicas {
					t.Errorf("minAvailable %d with %d replicas: no pod could ever be evicted", n, *dep.Spec.Replicas)
				}
			case "ConfigMap":
				if _, ok := o.Data["leaf.yaml"]; !ok {
					t.Error("no data[leaf.yaml]")
				}
			case "Secret":
				if len(o.StringData)+len(o.Data) == 0 {
					t.Error("no data")
				}
			}
		})
	}
	t.Run("kustomization", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
		var want []string
		for _, f := range files {
			if b := filepath.Base(f); b != "kustomization.yaml" {
				want = append(want, b)
			}
		}
		got := slices.Sorted(slices.Values(kust.Resources))
		if !slices.Equal(got, want) {
			t.Errorf("kustomization.yaml resources %v, want every manifest %v", got, want)
		}
	})
}

// port resolves a probe's or a Service's port (a number, or the name of a
// container port) to the container port's number; 0 when no container
// port matches.
func port(t *testing.T, dep object, p yaml.Node) int {
	t.Helper()
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, cp := range c.Ports {
			if p.Value == cp.Name || p.Value == strconv.Itoa(cp.ContainerPort) {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// portOf is the port of a host:port setting.
func portOf(t *testing.T, key, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return n
}

// TestDeploymentConfig: leaf starts with what the Deployment gives it:
// its arguments, the ConfigMap's leaf.yaml where --config says, every
// LEAF_* variable (from the Secret's keys, the pod's IP) a real setting;
// the container ports are the ones leaf.yaml configures, and the probes
// ask leaf's own HTTP endpoints, which answer 200.
func TestDeploymentConfig(t *testing.T) {
	objs, _ := manifests(t)
	dep := one(t, objs, "Deployment")
	cm := one(t, objs, "ConfigMap")
	secret := one(t, objs, "Secret")
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]

	// The ConfigMap's leaf.yaml, where the volume mount puts it.
	dir := t.TempDir()
	var mounted string
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || v.ConfigMap.Name != cm.Metadata.Name {
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if it.Key == "leaf.yaml" {
					mounted = m.MountPath + "/" + it.Path
				}
			}
		}
	}
	if mounted == "" {
		t.Fatalf("the ConfigMap %s's leaf.yaml is not mounted in container %s", cm.Metadata.Name, c.Name)
	}
	local := filepath.Join(dir, "leaf.yaml")
	if err := os.WriteFile(local, []byte(cm.Data["leaf.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	sawConfig := false
	for _, a := range c.Args {
		if a == "--config="+mounted {
			a, sawConfig = "--config="+local, true
		}
		args = append(args, a)
	}
	if !sawConfig {
		t.Fatalf("args %q: want --config=%s, where the ConfigMap is mounted", c.Args, mounted)
	}

	// The environment as the kubelet makes it.
	vars := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Name != secret.Metadata.Name {
				t.Fatalf("env %s: Secret %q, want %q", e.Name, ref.Name, secret.Metadata.Name)
			}
			var ok bool
			if v, ok = secret.StringData[ref.Key]; !ok {
				t.Fatalf("env %s: the Secret has no key %q", e.Name, ref.Key)
			}
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			if e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Fatalf("env %s: fieldRef %q", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			v = "10.1.2.3"
		}
		for k, val := range vars { // $(VAR) of variables defined before
			v = strings.ReplaceAll(v, "$("+k+")", val)
		}
		vars[e.Name] = v
		if e.Name == announceVar {
			if v != "10.1.2.3:6380" {
				t.Errorf("%s = %q: want the pod's IP and the Redis port", announceVar, v)
			}
		}
		environ = append(environ, e.Name+"="+v)
	}
	if _, ok := vars[announceVar]; !ok {
		t.Errorf("no %s: the Redis Cluster face would announce the pod's listener address", announceVar)
	}

	cfg, err := config.Load(args, environ)
	if err != nil {
		t.Fatalf("leaf %v with %v: %v", args, environ, err)
	}
	if cfg.Server.AnnounceAddr != "10.1.2.3:6380" {
		t.Errorf("server.announce_addr = %q: want the pod's IP and the Redis port", cfg.Server.AnnounceAddr)
	}
	if cfg.Store.Driver == "sqlite" {
		t.Error("store.driver sqlite: each replica would have a database of its own, and IDs would repeat across them")
	}
	if cfg.Server.Password == "" {
		t.Error("no server.password: leaf refuses to listen beyond loopback without one")
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if want := portOf(t, "server.addr", cfg.Server.Addr); ports["redis"] != want {
		t.Errorf("container port redis %d, server.addr %s", ports["redis"], cfg.Server.Addr)
	}
	if cfg.HTTP.Addr == "" {
		t.Fatal("no http.addr: the probes have nothing to ask")
	}
	httpPort := portOf(t, "http.addr", cfg.HTTP.Addr)
	if ports["http"] != httpPort {
		t.Errorf("container port http %d, http.addr %s", ports["http"], cfg.HTTP.Addr)
	}

	// leaf's HTTP endpoints, over a real allocator.
	in := servertest.Start(t, servertest.Options{})
	web := httptest.NewServer(httpapi.New(in.Alloc, httpapi.Options{Server: in.Server}))
	defer web.Close()
	for _, tc := range []struct {
		name, path string
		p          *probe
	}{
		{"readinessProbe", "/readyz", c.ReadinessProbe},
		{"livenessProbe", "/healthz", c.LivenessProbe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.p == nil || tc.p.HTTPGet == nil {
				t.Fatal("no httpGet probe")
			}
			if tc.p.HTTPGet.Path != tc.path {
				t.Errorf("path %q, want %q", tc.p.HTTPGet.Path, tc.path)
			}
			if got := port(t, dep, tc.p.HTTPGet.Port); got != httpPort {
				t.Errorf("port %q is %d, want http.addr's %d", tc.p.HTTPGet.Port.Value, got, httpPort)
			}
			res, err := web.Client().Get(web.URL + tc.p.HTTPGet.Path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %s, want 200", tc.p.HTTPGet.Path, res.Status)
			}
		})
	}
}
