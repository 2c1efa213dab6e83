package deploy_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/rgit/rgit/testkit/gitenv"
	"github.com/rgit/rgit/transport/node/config"
	"github.com/rgit/rgit/transport/peertls"
)

// manifests is every object in deploy/*.yaml, by kind.
type manifests struct {
	namespaces   []*corev1.Namespace
	services     []*corev1.Service
	secrets      []*corev1.Secret
	statefulsets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	pdbs         []*policyv1.PodDisruptionBudget
	netpols      []*networkingv1.NetworkPolicy
	// lbVariant is api.yaml's commented LoadBalancer Service.
	lbVariant *corev1.Service
}

// decodeStrict decodes one YAML document into the Kubernetes type its
// kind names; unknown fields and unknown kinds are errors.
func (m *manifests) decodeStrict(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Namespace":
		o := &corev1.Namespace{}
		m.namespaces, obj = append(m.namespaces, o), o
	case "v1/Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
	case "v1/Secret":
		o := &corev1.Secret{}
		m.secrets, obj = append(m.secrets, o), o
	case "apps/v1/StatefulSet":
		o := &appsv1.StatefulSet{}
		m.statefulsets, obj = append(m.statefulsets, o), o
	case "apps/v1/Deployment":
		o := &appsv1.Deployment{}
		m.deployments, obj = append(m.deployments, o), o
	case "policy/v1/PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		m.pdbs, obj = append(m.pdbs, o), o
	case "networking.k8s.io/v1/NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		m.netpols, obj = append(m.netpols, o), o
	default:
		return fmt.Errorf("unexpected kind %s %s", tm.APIVersion, tm.Kind)
	}
	return yaml.UnmarshalStrict(doc, obj)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func load(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("deploy/*.yaml: %v %v", files, err)
	}
	m := &manifests{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := m.decodeStrict([]byte(doc)); err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
			}
		}
	}
	// The commented LoadBalancer variant must stay applicable once
	// uncommented (apart from its placeholder).
	b, _ := os.ReadFile("api.yaml")
	_, commented, ok := strings.Cut(string(b), "\n#---\n")
	if !ok {
		t.Fatal("api.yaml lacks the commented LoadBalancer variant (#---)")
	}
	var variant []string
	for _, l := range strings.Split(commented, "\n") {
		variant = append(variant, strings.TrimPrefix(l, "#"))
	}
	lb := &corev1.Service{}
	if err := yaml.UnmarshalStrict([]byte(strings.Join(variant, "\n")), lb); err != nil {
		t.Errorf("api.yaml commented LoadBalancer variant: %v", err)
	}
	m.lbVariant = lb
	return m
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestManifestsDecodeStrictly: every object is a known Kubernetes type
// with no misspelled field.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.statefulsets) != 1 || len(m.deployments) != 1 || len(m.pdbs) != 1 || len(m.netpols) != 1 {
		t.Fatalf("want one StatefulSet, Deployment, PDB and NetworkPolicy; got %d, %d, %d, %d",
			len(m.statefulsets), len(m.deployments), len(m.pdbs), len(m.netpols))
	}
	// The checks above are only as good as the strictness: a misspelled
	// field must fail.
	if err := (&manifests{}).decodeStrict([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {publishNotReadyAdresses: true}\n")); err == nil {
		t.Fatal("a misspelled field decoded without error")
	}
}

func (m *manifests) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

func envOf(c corev1.Container, name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return c.Env[i], true
}

// awsVars are the object store SDK's own variables (README: store).
var awsVars = []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT", "AWS_PROFILE"}

// TestManifestEnvIsRead: every variable the manifests set is one rgit
// reads (a misspelling would be silently ignored), and the git node's
// values pass the server's own configuration check.
func TestManifestEnvIsRead(t *testing.T) {
	m := load(t)
	known := slices.Clone(awsVars)
	for _, v := range config.Vars {
		known = append(known, v.Name)
	}
	var containers []corev1.Container
	containers = append(containers, m.statefulsets[0].Spec.Template.Spec.Containers...)
	containers = append(containers, m.deployments[0].Spec.Template.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.Env {
			if !slices.Contains(known, e.Name) {
				t.Errorf("container %s sets %s, which nothing reads", c.Name, e.Name)
			}
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
				if !m.hasSecretKey(r.SecretKeyRef.Name, r.SecretKeyRef.Key) {
					t.Errorf("container %s: %s from secret %s key %s, which secrets.yaml lacks", c.Name, e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
				}
			}
		}
	}
	for _, v := range m.statefulsets[0].Spec.Template.Spec.Volumes {
		if v.Secret != nil && !slices.ContainsFunc(m.secrets, func(s *corev1.Secret) bool { return s.Name == v.Secret.SecretName }) {
			t.Errorf("volume %s mounts secret %s, which secrets.yaml lacks", v.Name, v.Secret.SecretName)
		}
	}
	if _, err := config.Parse(m.nodeEnv(t)); err != nil {
		t.Errorf("the StatefulSet's environment fails rgit's configuration: %v", err)
	}
}

// nodeEnv is the git node's environment as pod rgit-1 would see it, with
// secrets filled in and the peer TLS secret's files (generated) mounted.
func (m *manifests) nodeEnv(t *testing.T) func(string) string {
	t.Helper()
	tlsDir := t.TempDir()
	if err := peertls.Generate(tlsDir, "rgit"); err != nil {
		t.Fatal(err)
	}
	node := m.statefulsets[0].Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range node.Env {
		switch {
		case e.ValueFrom == nil && strings.HasPrefix(e.Value, peerTLSMount+"/"):
			env[e.Name] = filepath.Join(tlsDir, strings.TrimPrefix(e.Value, peerTLSMount+"/"))
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.Name == "RGIT_REDIS_URL":
			env[e.Name] = "redis://redis.rgit.svc:6379/0"
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = m.statefulsets[0].Name + "-1"
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "0123456789abcdef0123456789abcdef"
		default:
			t.Errorf("env %s: unsupported source", e.Name)
		}
	}
	return func(k string) string { return env[k] }
}

// peerTLSMount is where the StatefulSet mounts the rgit-peer-tls secret.
const peerTLSMount = "/peer-tls"

func (m *manifests) hasSecretKey(secret, key string) bool {
	for _, s := range m.secrets {
		if s.Name == secret {
			_, ok := s.StringData[key]
			return ok
		}
	}
	return false
}

// containerPort resolves a probe's or Service's port (name or number).
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// TestManifestProbesExist: each HTTP probe hits a container port that is
// the node's HTTP listener, on a path a running node answers 200.
func TestManifestProbesExist(t *testing.T) {
	m := load(t)
	ss := m.statefulsets[0]
	c := ss.Spec.Template.Spec.Containers[0]
	cfg, err := config.Parse(m.nodeEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	httpPort := portOf(t, cfg.HTTPAddr) // the node's own RGIT_HTTP_ADDR
	srv := gitenv.StartServer(t, gitenv.FileStore(t))
	for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP probe", what)
			continue
		}
		port, ok := containerPort(c, p.HTTPGet.Port)
		if !ok || port != httpPort {
			t.Errorf("%s probe port %s is container port %d, want the HTTP listener %d", what, p.HTTPGet.Port.String(), port, httpPort)
		}
		resp, err := http.Get("http://" + srv.HTTPAddr + p.HTTPGet.Path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s probe GET %s = %d on a serving node", what, p.HTTPGet.Path, resp.StatusCode)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/ready" {
		t.Errorf("readiness must follow the traffic state (/ready), not %s", c.ReadinessProbe.HTTPGet.Path)
	}
	// Services route to ports the containers have.
	for _, s := range m.services {
		pods := m.podsSelectedBy(s.Spec.Selector)
		if len(pods) == 0 {
			t.Errorf("Service %s selects no workload", s.Name)
		}
		for _, sp := range s.Spec.Ports {
			for _, pod := range pods {
				if _, ok := containerPort(pod.Containers[0], sp.TargetPort); !ok {
					t.Errorf("Service %s port %s: target %s is no container port", s.Name, sp.Name, sp.TargetPort.String())
				}
			}
		}
	}
}

func (m *manifests) podsSelectedBy(sel map[string]string) []corev1.PodSpec {
	var out []corev1.PodSpec
	match := func(labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for _, s := range m.statefulsets {
		if match(s.Spec.Template.Labels) {
			out = append(out, s.Spec.Template.Spec)
		}
	}
	for _, d := range m.deployments {
		if match(d.Spec.Template.Labels) {
			out = append(out, d.Spec.Template.Spec)
		}
	}
	return out
}

// drainMargin is the time the grace period keeps after preStop and the
// drain for closing databases (rgit.yaml's arithmetic).
const drainMargin = 10

// TestManifestGraceCoversDrain: Kubernetes must not kill a node before
// preStop, the drain (RGIT_DRAIN_SECS) and the close are done.
func TestManifestGraceCoversDrain(t *testing.T) {
	m := load(t)
	spec := m.statefulsets[0].Spec.Template.Spec
	c := spec.Containers[0]
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("want a preStop sleep action (the image has no shell to run sleep)")
	}
	preStop := c.Lifecycle.PreStop.Sleep.Seconds
	drain := int64(25)
	if e, ok := envOf(c, "RGIT_DRAIN_SECS"); ok {
		n, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		drain = n
	}
	grace := int64(30) // Kubernetes' default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = *spec.TerminationGracePeriodSeconds
	}
	if grace < preStop+drain+drainMargin {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %d + RGIT_DRAIN_SECS %d + %d", grace, preStop, drain, drainMargin)
	}
}

// TestManifestPeerService: the headless Service is the StatefulSet's
// serviceName, publishes not-ready addresses (joining nodes talk to the
// leader), and RGIT_PEER_SVC spells its DNS name.
func TestManifestPeerService(t *testing.T) {
	m := load(t)
	ss := m.statefulsets[0]
	svc := m.service(t, ss.Spec.ServiceName)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want headless and true", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	e, _ := envOf(ss.Spec.Template.Spec.Containers[0], "RGIT_PEER_SVC")
	if want := svc.Name + "." + svc.Namespace + ".svc.cluster.local"; e.Value != want {
		t.Errorf("RGIT_PEER_SVC %q, want %q", e.Value, want)
	}
	// The api tier's upstream is a Service on the peer HTTP port.
	api := m.deployments[0].Spec.Template.Spec.Containers[0]
	up, _ := envOf(api, "RGIT_UPSTREAM")
	host, port, ok := strings.Cut(strings.TrimPrefix(up.Value, "http://"), ":")
	upSvc := m.service(t, strings.Split(host, ".")[0])
	if !ok || !slices.ContainsFunc(upSvc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port }) {
		t.Errorf("RGIT_UPSTREAM %q names no port of Service %s", up.Value, upSvc.Name)
	}
	// Anti-affinity, PDB and NetworkPolicy select the fleet.
	if a := ss.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Error("StatefulSet has no pod anti-affinity")
	}
	if got := m.pdbs[0].Spec.Selector.MatchLabels; got["app"] != ss.Spec.Template.Labels["app"] {
		t.Errorf("PDB selects %v", got)
	}
	for _, c := range append(ss.Spec.Template.Spec.Containers, api) {
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s has no memory limit (the admission budget)", c.Name)
		}
	}
}

// TestManifestNetworkPolicy: the peer ports admit only the fleet and the
// api tier.
func TestManifestNetworkPolicy(t *testing.T) {
	m := load(t)
	np := m.netpols[0]
	for _, peerPort := range []int32{8081, 8082} {
		for _, rule := range np.Spec.Ingress {
			if !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.IntVal == peerPort }) {
				continue
			}
			var from []string
			for _, f := range rule.From {
				if f.PodSelector == nil || f.IPBlock != nil || f.NamespaceSelector != nil {
					t.Errorf("port %d admitted from %+v, want pod selectors only", peerPort, f)
					continue
				}
				from = append(from, f.PodSelector.MatchLabels["app"])
			}
			slices.Sort(from)
			if !slices.Equal(from, []string{"rgit", "rgit-api"}) {
				t.Errorf("port %d admitted from %v, want the fleet and the api tier only", peerPort, from)
			}
		}
	}
}

// TestManifestMetricsScrape: Prometheus is told to scrape the port the
// node serves /metrics on (RGIT_METRICS_ADDR), a container port that no
// public Service routes to and the NetworkPolicy admits only from inside
// the cluster.
func TestManifestMetricsScrape(t *testing.T) {
	m := load(t)
	ss := m.statefulsets[0]
	c := ss.Spec.Template.Spec.Containers[0]
	cfg, err := config.Parse(m.nodeEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr == "" {
		t.Fatal("RGIT_METRICS_ADDR unset: with peer TLS on, Prometheus cannot scrape the peer HTTP port")
	}
	want := portOf(t, cfg.MetricsAddr)
	ann := ss.Spec.Template.Annotations
	if ann["prometheus.io/port"] != strconv.Itoa(int(want)) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v, want port %d and path /metrics", ann, want)
	}
	if _, ok := containerPort(c, intstr.FromInt32(want)); !ok {
		t.Errorf("metrics port %d is no container port", want)
	}
	if want == portOf(t, cfg.HTTPAddr) {
		t.Errorf("metrics on the public HTTP port %d", want)
	}
	for _, s := range m.services {
		for _, sp := range s.Spec.Ports {
			if port, ok := containerPort(c, sp.TargetPort); ok && port == want && s.Spec.Type == corev1.ServiceTypeLoadBalancer {
				t.Errorf("Service %s exposes the metrics port", s.Name)
			}
		}
	}
	admitted := false
	for _, rule := range m.netpols[0].Spec.Ingress {
		if !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.IntVal == want }) {
			continue
		}
		admitted = true
		if len(rule.From) == 0 {
			t.Errorf("metrics port %d admitted from anywhere", want)
		}
		for _, f := range rule.From {
			if f.IPBlock != nil {
				t.Errorf("metrics port %d admitted from an IP block %+v", want, f.IPBlock)
			}
		}
	}
	if !admitted {
		t.Errorf("the NetworkPolicy admits nothing to metrics port %d", want)
	}
}

// TestManifestImagesPinned: every container runs one image, by digest.
func TestManifestImagesPinned(t *testing.T) {
	m := load(t)
	var images []string
	for _, c := range append(m.statefulsets[0].Spec.Template.Spec.Containers, m.deployments[0].Spec.Template.Spec.Containers...) {
		if _, err := name.NewDigest(c.Image); err != nil {
			t.Errorf("container %s image %q is not pinned by digest (make manifests): %v", c.Name, c.Image, err)
		}
		images = append(images, c.Image)
	}
	slices.Sort(images)
	if images = slices.Compact(images); len(images) != 1 {
		t.Errorf("the tiers run different images: %v", images)
	}
}

// TestManifestAPILoadBalancerPlaceholder: the commented LoadBalancer
// variant keeps a source range the API server rejects, so applying it
// unedited fails instead of exposing the API.
func TestManifestAPILoadBalancerPlaceholder(t *testing.T) {
	m := load(t)
	lb := m.lbVariant
	if lb.Spec.Type != corev1.ServiceTypeLoadBalancer || len(lb.Spec.LoadBalancerSourceRanges) == 0 {
		t.Fatalf("variant: type %s ranges %v", lb.Spec.Type, lb.Spec.LoadBalancerSourceRanges)
	}
	for _, r := range lb.Spec.LoadBalancerSourceRanges {
		if _, _, err := net.ParseCIDR(r); err == nil {
			t.Errorf("source range %q is a valid CIDR; the shipped placeholder must be refused", r)
		}
	}
	if api := m.service(t, "rgit-api"); api.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("the shipped api Service is %s, want ClusterIP", api.Spec.Type)
	}
}
