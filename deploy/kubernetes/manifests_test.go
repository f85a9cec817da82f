// Package kubernetes checks Airlock's Kubernetes manifests: every object
// kustomize renders decodes strictly (unknown or duplicate fields fail)
// into its k8s.io/api type, and the deployment keeps the promises
// docs/operations.md makes. Its own module, so the product's go.mod does
// not carry the Kubernetes dependency tree.
package kubernetes

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

type rendered struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	policies    []*networkingv1.NetworkPolicy
	pdbs        []*policyv1.PodDisruptionBudget
	configMaps  map[string]*corev1.ConfigMap
	kinds       map[string]int
}

func render(t *testing.T, dir string) rendered {
	t.Helper()
	out, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	r := rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, kinds: map[string]int{}}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		r.kinds[meta.Kind]++
		var obj any
		switch meta.Kind {
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "Service":
			obj = &corev1.Service{}
		case "NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "ConfigMap":
			obj = &corev1.ConfigMap{}
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Namespace":
			obj = &corev1.Namespace{}
		default:
			t.Fatalf("%s: an object of kind %q the test does not know", dir, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: %s does not decode strictly: %v", dir, meta.Kind, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *networkingv1.NetworkPolicy:
			r.policies = append(r.policies, o)
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		}
	}
	return r
}

func TestBaseAndOverlays(t *testing.T) {
	for _, dir := range []string{"base", "overlays/production"} {
		t.Run(dir, func(t *testing.T) {
			r := render(t, dir)
			serve, host := r.deployments["airlock-serve"], r.deployments["airlock-host"]
			if serve == nil || host == nil {
				t.Fatalf("deployments: %v", r.kinds)
			}
			if *serve.Spec.Replicas < 2 || len(r.pdbs) != 1 || r.pdbs[0].Spec.MinAvailable.IntValue() < 1 {
				t.Fatal("airlock serve needs 2+ replicas and a PodDisruptionBudget")
			}
			c := serve.Spec.Template.Spec.Containers[0]
			if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
				t.Fatal("serve probes must be /readyz and /healthz")
			}
			if serve.Spec.Template.Spec.ServiceAccountName == "" {
				t.Fatal("serve needs a ServiceAccount for Vault's Kubernetes auth")
			}
			// The host with a serve sidecar sharing the broker socket.
			names := map[string]corev1.Container{}
			for _, c := range host.Spec.Template.Spec.Containers {
				names[c.Name] = c
			}
			shared := func(c corev1.Container) bool {
				for _, m := range c.VolumeMounts {
					if m.Name == "run" && m.MountPath == "/run/airlock" {
						return true
					}
				}
				return false
			}
			if !shared(names["host"]) || !shared(names["serve"]) {
				t.Fatal("the host and its serve sidecar must share /run/airlock (the broker socket)")
			}
			for _, d := range r.deployments {
				ps := d.Spec.Template.Spec
				if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
					t.Fatalf("%s: pods must run as non-root", d.Name)
				}
				for _, c := range ps.Containers {
					sc := c.SecurityContext
					if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
						!*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) == 0 {
						t.Fatalf("%s/%s: no privilege escalation, read-only root, capabilities dropped", d.Name, c.Name)
					}
				}
			}
			// Plugin pods reach only the proxy (and DNS, Vault, Redis for
			// the sidecar): an egress policy selecting them, allowing the
			// proxy pods on 8899.
			if len(r.policies) != 1 {
				t.Fatal("one NetworkPolicy for the plugin pods")
			}
			p := r.policies[0]
			if p.Spec.PodSelector.MatchLabels["airlock.dev/role"] != host.Spec.Template.Labels["airlock.dev/role"] ||
				len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
				t.Fatal("the NetworkPolicy must select the plugin pods for egress")
			}
			proxyRule := false
			for _, rule := range p.Spec.Egress {
				for _, to := range rule.To {
					if to.PodSelector != nil && to.PodSelector.MatchLabels["airlock.dev/role"] == serve.Spec.Template.Labels["airlock.dev/role"] &&
						len(rule.Ports) == 1 && rule.Ports[0].Port.IntValue() == 8899 {
						proxyRule = true
					}
					if to.IPBlock != nil {
						t.Fatal("no IP blocks: the proxy is the only way out")
					}
				}
			}
			if !proxyRule {
				t.Fatal("the plugin pods' only way out must be the proxy pods' port 8899")
			}
			if !strings.Contains(dir, "overlays") {
				return
			}
			if r.kinds["Namespace"] != 1 || *serve.Spec.Replicas != 3 {
				t.Fatal("the production overlay: a namespace and three proxy replicas")
			}
		})
	}
}

// Airlock refuses a state directory, or a broker socket's directory,
// that others may write to, and an emptyDir's root is 0777 (2777 with
// fsGroup): every container's state_dir and broker socket directory must
// be a directory Airlock makes (0700) strictly inside one of its
// emptyDir mounts, never the mount itself.
func TestPathsInsideTheirEmptyDirs(t *testing.T) {
	for _, dir := range []string{"base", "overlays/production"} {
		r := render(t, dir)
		cm := r.configMaps["airlock-config"]
		if cm == nil {
			t.Fatalf("%s: no airlock-config ConfigMap", dir)
		}
		var cfg struct {
			StateDir string `json:"state_dir"`
			Broker   struct {
				API struct {
					Socket string `json:"socket"`
				} `json:"api"`
			} `json:"broker"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["airlock.yaml"]), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.StateDir == "" || cfg.Broker.API.Socket == "" {
			t.Fatalf("%s: the config names no state_dir or broker socket", dir)
		}
		for _, d := range r.deployments {
			ps := d.Spec.Template.Spec
			emptyDir := map[string]bool{}
			for _, v := range ps.Volumes {
				emptyDir[v.Name] = v.EmptyDir != nil
			}
			for _, c := range ps.Containers {
				for key, p := range map[string]string{"state_dir": cfg.StateDir, "the broker socket's directory": filepath.Dir(cfg.Broker.API.Socket)} {
					var mount string
					var isEmpty bool
					for _, m := range c.VolumeMounts {
						if (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) && len(m.MountPath) > len(mount) {
							mount, isEmpty = m.MountPath, emptyDir[m.Name]
						}
					}
					if mount == "" {
						continue // on the read-only root: the container does not use it
					}
					if !isEmpty || p == mount {
						t.Errorf("%s: %s/%s: %s %s must be a directory inside an emptyDir mount, not the mount %s itself", dir, d.Name, c.Name, key, p, mount)
					}
				}
			}
		}
	}
}
