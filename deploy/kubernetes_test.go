package deploy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/server"
)

// The subset of the Kubernetes object schema these tests read. Fields they do not read are ignored.

type objectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type manifest struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	file       string
	node       *yaml.Node
}

func (m manifest) String() string { return fmt.Sprintf("%s %s (%s)", m.Kind, m.Metadata.Name, m.file) }

// intOrString is a Kubernetes IntOrString: a port number or a port name, a count or a percentage.
type intOrString struct {
	Int    int
	String string
}

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error {
	if n.Tag == "!!int" {
		i, err := strconv.Atoi(n.Value)
		v.Int = i
		return err
	}
	v.String = n.Value
	return nil
}

type probe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type container struct {
	Name           string          `yaml:"name"`
	Image          string          `yaml:"image"`
	Args           []string        `yaml:"args"`
	Env            []envVar        `yaml:"env"`
	Ports          []containerPort `yaml:"ports"`
	ReadinessProbe *probe          `yaml:"readinessProbe"`
	LivenessProbe  *probe          `yaml:"livenessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []volumeMount `yaml:"volumeMounts"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	SubPath   string `yaml:"subPath"`
}

// port resolves a probe or Service target port (a number or a container port name) to a number.
func (c container) port(p intOrString) int {
	if p.String == "" {
		return p.Int
	}
	for _, cp := range c.Ports {
		if cp.Name == p.String {
			return cp.ContainerPort
		}
	}
	return 0
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
		Items      []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type podTemplate struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot *bool `yaml:"runAsNonRoot"`
			RunAsUser    *int  `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		Containers []container `yaml:"containers"`
		Volumes    []volume    `yaml:"volumes"`
	} `yaml:"spec"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type workloadSpec struct {
	Replicas             *int          `yaml:"replicas"`
	ServiceName          string        `yaml:"serviceName"`
	Selector             labelSelector `yaml:"selector"`
	Template             podTemplate   `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata objectMeta `yaml:"metadata"`
	} `yaml:"volumeClaimTemplates"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []servicePort     `yaml:"ports"`
}

type servicePort struct {
	Name       string      `yaml:"name"`
	Port       int         `yaml:"port"`
	TargetPort intOrString `yaml:"targetPort"`
}

type pdbSpec struct {
	MinAvailable *intOrString  `yaml:"minAvailable"`
	Selector     labelSelector `yaml:"selector"`
}

type secretData struct {
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

// value returns a key of a Secret as the pod sees it: stringData as is, data base64-decoded.
func (s secretData) value(key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	if v, ok := s.Data[key]; ok {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err == nil
	}
	return "", false
}

// loadManifests reads every YAML document in every file below dir (subdirectories too: the Secret
// template lives in one).
func loadManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml")) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ms, err := decodeManifests(p, data)
		out = append(out, ms...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeManifests reads the YAML documents of one file (or of helm template's output), named file in
// messages.
func decodeManifests(file string, data []byte) ([]manifest, error) {
	var out []manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		m := manifest{file: file, node: &n}
		if err := n.Decode(&m); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if m.Kind == "" && m.APIVersion == "" {
			continue // an empty document, e.g. after a trailing ---
		}
		if m.Kind == "" || m.APIVersion == "" || m.Metadata.Name == "" {
			return nil, fmt.Errorf("%s: a document without kind, apiVersion or metadata.name", file)
		}
		out = append(out, m)
	}
	return out, nil
}

func specOf[T any](t *testing.T, m manifest) T {
	t.Helper()
	var wrapper struct {
		Spec T `yaml:"spec"`
	}
	if err := m.node.Decode(&wrapper); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	return wrapper.Spec
}

func decodeAs[T any](t *testing.T, m manifest) T {
	t.Helper()
	var v T
	if err := m.node.Decode(&v); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	return v
}

// show renders an optional manifest field.
func show[T any](v *T) string {
	if v == nil {
		return "(unset)"
	}
	return fmt.Sprintf("%+v", *v)
}

// selects reports whether a selector picks pods with these labels (a non-empty selector, all of it).
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// kubernetesStack is the parsed manifests, with the objects the tests look at picked out.
type kubernetesStack struct {
	all        []manifest
	namespace  string
	deployment manifest
	deploySpec workloadSpec
	edgeq      container
	configMaps map[string]map[string]string
	secrets    map[string]secretData
	services   map[string]serviceSpec
	pdbs       []pdbSpec
	redis      []workloadSpec // StatefulSets
}

func loadStack(t *testing.T) kubernetesStack {
	t.Helper()
	return stackOf(t, loadManifests(t, "kubernetes"))
}

// stackOf picks the objects the tests look at out of a set of manifests.
func stackOf(t *testing.T, all []manifest) kubernetesStack {
	t.Helper()
	s := kubernetesStack{
		all:        all,
		configMaps: map[string]map[string]string{},
		secrets:    map[string]secretData{},
		services:   map[string]serviceSpec{},
	}
	var deployments []manifest
	for _, m := range s.all {
		switch m.Kind {
		case "Namespace":
			s.namespace = m.Metadata.Name
		case "Deployment":
			deployments = append(deployments, m)
		case "ConfigMap":
			s.configMaps[m.Metadata.Name] = decodeAs[struct {
				Data map[string]string `yaml:"data"`
			}](t, m).Data
		case "Secret":
			s.secrets[m.Metadata.Name] = decodeAs[secretData](t, m)
		case "Service":
			s.services[m.Metadata.Name] = specOf[serviceSpec](t, m)
		case "PodDisruptionBudget":
			s.pdbs = append(s.pdbs, specOf[pdbSpec](t, m))
		case "StatefulSet":
			s.redis = append(s.redis, specOf[workloadSpec](t, m))
		}
	}
	if len(deployments) != 1 {
		t.Fatalf("want exactly one Deployment (edgeq), found %d", len(deployments))
	}
	s.deployment = deployments[0]
	s.deploySpec = specOf[workloadSpec](t, s.deployment)
	for _, c := range s.deploySpec.Template.Spec.Containers {
		if repo := imageRepository(c.Image); repo == "edgeq" || strings.HasSuffix(repo, "/edgeq") {
			s.edgeq = c
		}
	}
	if s.edgeq.Name == "" {
		t.Fatalf("%s: no container runs the edgeq image", s.deployment)
	}
	return s
}

// imageRepository is an image reference without its tag and digest.
func imageRepository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// configPath is the -config argument of the edgeq container.
func (s kubernetesStack) configPath(t *testing.T) string {
	t.Helper()
	args := s.edgeq.Args
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "-config="); ok {
			return v
		}
		if a == "-config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("the edgeq container has no -config argument: %q", args)
	return ""
}

// mountOf returns the volume mounted at dir in the edgeq container and the mount's subPath.
func (s kubernetesStack) mountOf(dir string) (volume, string, bool) {
	for _, vm := range s.edgeq.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range s.deploySpec.Template.Spec.Volumes {
			if v.Name == vm.Name {
				return v, vm.SubPath, true
			}
		}
	}
	return volume{}, "", false
}

// loadedConfig writes the ConfigMap's configuration file to a temporary directory, sets the EDGEQ_*
// variables the Deployment gives the container (secret values from the Secret manifest), and loads it
// with the real loader, as the pod would.
func (s kubernetesStack) loadedConfig(t *testing.T) (*config.Config, string) {
	t.Helper()
	configPath := s.configPath(t)
	vol, subPath, ok := s.mountOf(path.Dir(configPath))
	if !ok || vol.ConfigMap == nil {
		t.Fatalf("-config %s: no ConfigMap volume is mounted at %s", configPath, path.Dir(configPath))
	}
	if subPath != "" {
		t.Fatalf("the configuration is mounted with subPath %q: such mounts never see ConfigMap updates", subPath)
	}
	data, ok := s.configMaps[vol.ConfigMap.Name]
	if !ok {
		t.Fatalf("volume %s names ConfigMap %s, which the manifests do not define", vol.Name, vol.ConfigMap.Name)
	}
	text, ok := data[path.Base(configPath)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s (the file -config names)", vol.ConfigMap.Name, path.Base(configPath))
	}
	for _, e := range s.edgeq.Env {
		if !strings.HasPrefix(e.Name, config.EnvPrefix+"_") {
			continue
		}
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			secret, ok := s.secrets[ref.Name]
			if !ok {
				t.Fatalf("env %s: Secret %s is not defined", e.Name, ref.Name)
			}
			if value, ok = secret.value(ref.Key); !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
		}
		t.Setenv(e.Name, value)
	}
	file := filepath.Join(t.TempDir(), path.Base(configPath))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("the ConfigMap's configuration does not load:\n%v", err)
	}
	return cfg, file
}

func portOf(t *testing.T, field, hostPort string) (string, int) {
	t.Helper()
	host, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatalf("%s %q: %v", field, hostPort, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s %q: %v", field, hostPort, err)
	}
	return host, n
}

func TestKubernetes_EveryKindIsThereInOneNamespace(t *testing.T) {
	s := loadStack(t)
	kinds := map[string]int{}
	for _, m := range s.all {
		kinds[m.Kind]++
	}
	for _, kind := range []string{"Namespace", "ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget", "StatefulSet"} {
		if kinds[kind] == 0 {
			t.Errorf("no %s among the manifests (found %v)", kind, kinds)
		}
	}
	if s.namespace == "" {
		t.Fatal("no Namespace")
	}
	for _, m := range s.all {
		if m.Kind != "Namespace" && m.Metadata.Namespace != s.namespace {
			t.Errorf("%s: namespace %q, want %q", m, m.Metadata.Namespace, s.namespace)
		}
	}
}

func TestKubernetes_DeploymentRunsThreeProbedHardenedReplicas(t *testing.T) {
	s := loadStack(t)
	spec, c := s.deploySpec, s.edgeq
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas %s, want 3", show(spec.Replicas))
	}
	podLabels := spec.Template.Metadata.Labels
	if !selects(spec.Selector.MatchLabels, podLabels) {
		t.Errorf("the Deployment's selector %v does not pick its pods %v", spec.Selector.MatchLabels, podLabels)
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: missing, want GET %s on port 9090", p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || c.port(p.probe.HTTPGet.Port) != 9090 {
			t.Errorf("%s: GET %s on port %d, want GET %s on port 9090", p.name, p.probe.HTTPGet.Path, c.port(p.probe.HTTPGet.Port), p.path)
		}
	}
	// The image is named by version: the release the Helm chart runs.
	if want := "ghcr.io/edgeq/edgeq:" + chartMeta(t).AppVersion; c.Image != want {
		t.Errorf("image %q, want %s (the Helm chart's appVersion)", c.Image, want)
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("no resources.requests.%s", r)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Error("no resources.limits.memory")
	}
	pod := spec.Template.Spec.SecurityContext
	if pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || (pod.RunAsUser != nil && *pod.RunAsUser == 0) {
		t.Errorf("the pod may run as root: %+v", pod)
	}
	sc := c.SecurityContext
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("capabilities are not dropped")
	}
	annotations := spec.Template.Metadata.Annotations
	if annotations["prometheus.io/scrape"] != "true" || annotations["prometheus.io/port"] != "9090" || annotations["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v do not point Prometheus at :9090/metrics", annotations)
	}

	// The ports the image exposes are the ones the pod declares.
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	expose := regexp.MustCompile(`(?m)^EXPOSE\s+(.+)$`).FindSubmatch(dockerfile)
	if expose == nil {
		t.Fatal("the Dockerfile has no EXPOSE line")
	}
	for _, cp := range c.Ports {
		if !slices.Contains(strings.Fields(string(expose[1])), strconv.Itoa(cp.ContainerPort)) {
			t.Errorf("container port %d (%s) is not one the Dockerfile exposes (%s)", cp.ContainerPort, cp.Name, expose[1])
		}
	}

	for _, pdb := range s.pdbs {
		if !selects(pdb.Selector.MatchLabels, podLabels) {
			t.Errorf("a PodDisruptionBudget's selector %v does not pick the edgeq pods", pdb.Selector.MatchLabels)
			continue
		}
		if pdb.MinAvailable == nil || pdb.MinAvailable.Int != 2 {
			t.Errorf("PodDisruptionBudget minAvailable %s, want 2", show(pdb.MinAvailable))
		}
		if spec.Replicas != nil && pdb.MinAvailable != nil && pdb.MinAvailable.Int >= *spec.Replicas {
			t.Errorf("minAvailable %d with %d replicas: no pod could ever be evicted, node drains would hang", pdb.MinAvailable.Int, *spec.Replicas)
		}
	}
}

func TestKubernetes_ConfigMapConfigurationLoadsAndMatchesTheManifests(t *testing.T) {
	s := loadStack(t)
	cfg, file := s.loadedConfig(t)
	c := s.edgeq

	containerPorts := map[int]bool{}
	for _, cp := range c.Ports {
		containerPorts[cp.ContainerPort] = true
	}
	_, adminPort := portOf(t, "admin.listen", cfg.Admin.Listen)
	adminHost, _ := portOf(t, "admin.listen", cfg.Admin.Listen)
	if adminPort != 9090 || !containerPorts[adminPort] {
		t.Errorf("admin.listen %q: the probes and Prometheus use the container port 9090", cfg.Admin.Listen)
	}
	if adminHost != "" {
		t.Errorf("admin.listen %q binds one address: the kubelet's probes come to the pod IP", cfg.Admin.Listen)
	}
	// The admin listener answers the names of every Service in front of its port (admin.allowed_hosts):
	// any other name gets 421.
	allowed := map[string]bool{}
	for _, h := range cfg.Admin.AllowedHosts {
		allowed[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	for name, svc := range s.services {
		if !selects(svc.Selector, s.deploySpec.Template.Metadata.Labels) ||
			!slices.ContainsFunc(svc.Ports, func(p servicePort) bool { return c.port(p.TargetPort) == adminPort }) {
			continue
		}
		for _, dns := range []string{name, name + "." + s.namespace, name + "." + s.namespace + ".svc",
			name + "." + s.namespace + ".svc.cluster.local"} {
			if !allowed[dns] {
				t.Errorf("Service %s reaches the admin port, but admin.allowed_hosts %q lacks its name %s: it would get 421",
					name, cfg.Admin.AllowedHosts, dns)
			}
		}
	}
	_, publicPort := portOf(t, "server.listen", cfg.Server.Listen)
	if !containerPorts[publicPort] {
		t.Errorf("server.listen %q is not a container port", cfg.Server.Listen)
	}

	// The public Service sends traffic to server.listen.
	podLabels := s.deploySpec.Template.Metadata.Labels
	public := false
	for name, svc := range s.services {
		if !selects(svc.Selector, podLabels) {
			continue
		}
		for _, p := range svc.Ports {
			if c.port(p.TargetPort) == 0 {
				t.Errorf("Service %s: targetPort %+v is not a port of the edgeq container", name, p.TargetPort)
			}
			public = public || c.port(p.TargetPort) == publicPort
		}
	}
	if !public {
		t.Errorf("no Service sends traffic to the edgeq pods' public port %d", publicPort)
	}

	// redis.addr is the Redis Service.
	if cfg.Redis.Addr == "" {
		t.Fatal("redis.addr is empty: the embedded store keeps nothing and is not shared between replicas")
	}
	host, port := portOf(t, "redis.addr", cfg.Redis.Addr)
	svcName, ns, _ := strings.Cut(host, ".")
	svc, ok := s.services[svcName]
	if !ok || (ns != "" && !strings.HasPrefix(ns, s.namespace)) {
		t.Fatalf("redis.addr %q is not a Service of namespace %s", cfg.Redis.Addr, s.namespace)
	}
	if !slices.ContainsFunc(svc.Ports, func(p servicePort) bool { return p.Port == port }) {
		t.Errorf("redis.addr port %d is not a port of Service %s", port, svcName)
	}
	redisSelected := slices.ContainsFunc(s.redis, func(r workloadSpec) bool { return selects(svc.Selector, r.Template.Metadata.Labels) })
	if !redisSelected {
		t.Errorf("Service %s selects no StatefulSet's pods", svcName)
	}

	// The signing key file comes from the Secret, mounted where the configuration looks for it.
	keyFile := cfg.Tokens.SigningKeyFile
	if keyFile == "" {
		t.Fatal("tokens.signing_key_file is empty: every replica would sign with a key of its own")
	}
	vol, _, ok := s.mountOf(path.Dir(keyFile))
	if !ok || vol.Secret == nil {
		t.Fatalf("tokens.signing_key_file %s: no Secret volume is mounted at %s", keyFile, path.Dir(keyFile))
	}
	secret, ok := s.secrets[vol.Secret.SecretName]
	if !ok {
		t.Fatalf("volume %s names Secret %s, which the manifests do not define", vol.Name, vol.Secret.SecretName)
	}
	key := path.Base(keyFile)
	for _, item := range vol.Secret.Items {
		if item.Path == key {
			key = item.Key
		}
	}
	pem, ok := secret.value(key)
	if !ok {
		t.Fatalf("Secret %s has no key %s for %s", vol.Secret.SecretName, key, keyFile)
	}
	// The template must not ship a usable private key: a deployment that forgets to replace it must
	// fail to start, not sign tokens with a key published in a repository.
	placeholder := filepath.Join(t.TempDir(), "placeholder.pem")
	if err := os.WriteFile(placeholder, []byte(pem), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := token.LoadSigningKey(placeholder); err == nil {
		t.Errorf("Secret %s carries a loadable signing key: the template must only hold a placeholder", vol.Secret.SecretName)
	}

	// The admin API key reaches edgeq through EDGEQ_ADMIN_API_KEY from a Secret, never the ConfigMap.
	if !slices.ContainsFunc(c.Env, func(e envVar) bool {
		return e.Name == "EDGEQ_ADMIN_API_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
	}) {
		t.Error("EDGEQ_ADMIN_API_KEY is not taken from a Secret")
	}
	// Nor do the other secrets: they come from the Secret as EDGEQ_* variables.
	for _, key := range []string{"admin.api_key", "identity.secret", "redis.password", "turnstile.secret_key"} {
		if v := s.rawConfigValue(t, key); v != "" {
			t.Errorf("the ConfigMap sets %s: secrets belong in the Secret", key)
		}
	}

	// SIGTERM drains for up to server.shutdown_timeout after the preStop pause, then pending
	// compensations get a last attempt; the kubelet must not SIGKILL before that.
	grace := s.deploySpec.Template.Spec.TerminationGracePeriodSeconds
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if grace == nil || time.Duration(*grace)*time.Second <= preStop+cfg.Server.ShutdownTimeout+admission.FinalAttempt {
		t.Errorf("terminationGracePeriodSeconds %s is not above the preStop pause %s plus server.shutdown_timeout %s plus %s for pending compensations",
			show(grace), preStop, cfg.Server.ShutdownTimeout, admission.FinalAttempt)
	}

	// `edgeq check` accepts the file too (key files and page templates): with a real key in place of
	// the mounted one.
	key0, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := token.MarshalPrivateKey(key0)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "signing.pem")
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGEQ_TOKENS_SIGNING_KEY_FILE", keyPath)
	problems, _, err := server.Check(file)
	if err != nil || len(problems) > 0 {
		t.Errorf("edgeq check: %v %v", err, problems)
	}
}

// rawConfigValue returns a key of the ConfigMap's configuration file as written, before any
// environment variable applies.
func (s kubernetesStack) rawConfigValue(t *testing.T, dotted string) string {
	t.Helper()
	configPath := s.configPath(t)
	vol, _, _ := s.mountOf(path.Dir(configPath))
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(s.configMaps[vol.ConfigMap.Name][path.Base(configPath)]), &doc); err != nil {
		t.Fatal(err)
	}
	var v any = doc
	for part := range strings.SplitSeq(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[part]
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func TestKubernetes_RedisKeepsAnAppendOnlyFileOnAClaim(t *testing.T) {
	s := loadStack(t)
	if len(s.redis) != 1 {
		t.Fatalf("want one StatefulSet (Redis), found %d", len(s.redis))
	}
	r := s.redis[0]
	if _, ok := s.services[r.ServiceName]; !ok {
		t.Errorf("serviceName %q is not a Service of the manifests", r.ServiceName)
	}
	if len(r.Template.Spec.Containers) == 0 {
		t.Fatal("the StatefulSet has no container")
	}
	c := r.Template.Spec.Containers[0]
	flag := func(name string) string {
		for i, a := range c.Args {
			if a == name && i+1 < len(c.Args) {
				return c.Args[i+1]
			}
		}
		return ""
	}
	if flag("--appendonly") != "yes" || flag("--appendfsync") != "everysec" {
		t.Errorf("Redis args %q: want --appendonly yes --appendfsync everysec", c.Args)
	}
	dir := flag("--dir")
	if dir == "" {
		dir = "/data" // the official image's working directory
	}
	if len(r.VolumeClaimTemplates) == 0 {
		t.Fatal("no volumeClaimTemplates: the append-only file would die with the pod")
	}
	claim := r.VolumeClaimTemplates[0].Metadata.Name
	if !slices.ContainsFunc(c.VolumeMounts, func(vm volumeMount) bool {
		return vm.Name == claim && path.Clean(vm.MountPath) == path.Clean(dir)
	}) {
		t.Errorf("the claim %q is not mounted at Redis's directory %s", claim, dir)
	}
	if !selects(r.Selector.MatchLabels, r.Template.Metadata.Labels) {
		t.Errorf("the StatefulSet's selector does not pick its pods")
	}
}
