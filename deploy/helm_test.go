package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
	"github.com/edgeq/edgeq/internal/token"
	"github.com/edgeq/edgeq/server"
)

// The Helm chart in helm/edgeq is checked with helm itself, built from the Go module proxy at a pinned
// version (not a dependency of the module), and its rendered manifests are checked against edgeq the
// way the plain manifests are (kubernetes_test.go).

const (
	helmVersion = "v3.22.0"
	helmModule  = "helm.sh/helm/v3/cmd/helm"
	chartDir    = "helm/edgeq"
	// The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion: the preStop sleep action).
	// helm built with `go install` assumes v1.20 unless told.
	helmKubeVersion = "1.30.0"
	// The values file enabling every optional part of the chart.
	everythingValues = chartDir + "/ci/everything-values.yaml"
	helmRelease      = "shop"
	helmNamespace    = "edgeq"
)

var helmBuild struct {
	once sync.Once
	path string
	took time.Duration
	err  error
}

// helmBinary returns a helm executable of helmVersion. The first call of a test process installs it
// with `go install` into a directory of the user's cache, where later runs find it (a cold build
// downloads helm's modules and takes minutes; with Go's build cache warm, seconds). Without a network
// or a go command the test fails in CI and is skipped elsewhere.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmBuild.once.Do(func() {
		start := time.Now()
		helmBuild.path, helmBuild.err = installHelm(t)
		helmBuild.took = time.Since(start)
		if helmBuild.err == nil && helmBuild.took > 5*time.Second {
			fmt.Fprintf(os.Stderr, "deploy: built helm %s in %s (%s)\n", helmVersion, helmBuild.took.Round(time.Second), helmBuild.path)
		}
	})
	if helmBuild.err != nil {
		msg := fmt.Sprintf("helm %s could not be built with `go install %s@%s` (it needs the Go module proxy): %v",
			helmVersion, helmModule, helmVersion, helmBuild.err)
		if storetest.InCI() {
			t.Fatal(msg + "\nCI is set, so the Helm chart's tests may not be skipped")
		}
		t.Skip(msg + "\n(skipped outside CI; with CI=true this is a failure)")
	}
	return helmBuild.path
}

func installHelm(t *testing.T) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "edgeq-tests", "helm-"+helmVersion)
	bin := filepath.Join(dir, "helm")
	// The directory is named by the version, so a binary there that runs is the one wanted.
	if err := exec.Command(bin, "version", "--short").Run(); err == nil {
		return bin, nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Installed beside the final name, then renamed into place: two test processes never see half a file.
	tmp, err := os.MkdirTemp(dir, "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	timeout := 15 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(d)-30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "install", helmModule+"@"+helmVersion)
	cmd.Dir = tmp // outside this module: pkg@version ignores it anyway
	cmd.Env = append(os.Environ(), "GOBIN="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, lastLines(string(out), 20))
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runHelm runs helm with args and returns its standard output, or an error carrying its standard error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart as release helmRelease in helmNamespace with these extra arguments
// (-f FILE, --set K=V).
func helmTemplate(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", helmRelease, chartDir, "--namespace", helmNamespace, "--kube-version", helmKubeVersion}, extra...)
	return runHelm(t, args...)
}

// helmCase is a way of installing the chart: its helm arguments, and its values decoded for the checks.
type helmCase struct {
	name string
	args []string
}

func helmCases() []helmCase {
	return []helmCase{
		{"default values", nil},
		{"everything enabled", []string{"-f", everythingValues}},
		{"Sentinel", []string{"--set", "redis.sentinel.masterName=mymaster", "--set", "redis.sentinel.addrs={sentinel-0.sentinel:26379,sentinel-1.sentinel:26379,sentinel-2.sentinel:26379}",
			"--set", "redis.waitReplicas=2"}},
		{"Cluster", []string{"--set", "redis.cluster.addrs={redis-cluster-0.redis-cluster:6379,redis-cluster-1.redis-cluster:6379}", "--set", "redis.waitReplicas=1",
			"--set", "autoscaling.enabled=true"}},
	}
}

// renderedChart is the chart rendered with one case's values.
type renderedChart struct {
	kubernetesStack
	values chartValues
	hpas   []manifest
	kinds  map[string][]manifest
}

// chartValues is the part of values.yaml (and a case's values over it) the tests compare with.
type chartValues struct {
	ReplicaCount int `yaml:"replicaCount"`
	Image        struct {
		Repository string `yaml:"repository"`
		Tag        string `yaml:"tag"`
	} `yaml:"image"`
	Secrets map[string]struct {
		ExistingSecret string `yaml:"existingSecret"`
		Key            string `yaml:"key"`
	} `yaml:"secrets"`
	Redis struct {
		Addr     string `yaml:"addr"`
		Sentinel struct {
			MasterName string   `yaml:"masterName"`
			Addrs      []string `yaml:"addrs"`
		} `yaml:"sentinel"`
		Cluster struct {
			Addrs []string `yaml:"addrs"`
		} `yaml:"cluster"`
		WaitReplicas int `yaml:"waitReplicas"`
		Trial        struct {
			Enabled bool `yaml:"enabled"`
		} `yaml:"trial"`
	} `yaml:"redis"`
	Drain struct {
		PreStopSleepSeconds int `yaml:"preStopSleepSeconds"`
	} `yaml:"drain"`
	Autoscaling struct {
		Enabled bool `yaml:"enabled"`
	} `yaml:"autoscaling"`
	Metrics struct {
		ServiceMonitor struct {
			Enabled bool `yaml:"enabled"`
		} `yaml:"serviceMonitor"`
		PrometheusRule struct {
			Enabled bool `yaml:"enabled"`
		} `yaml:"prometheusRule"`
	} `yaml:"metrics"`
}

// renderChart renders the chart for c and reads the values it was rendered with (mergedValues).
func renderChart(t *testing.T, c helmCase) renderedChart {
	t.Helper()
	out, err := helmTemplate(t, c.args...)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	all, err := decodeManifests("helm template ("+c.name+")", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	r := renderedChart{kubernetesStack: stackOf(t, all), kinds: map[string][]manifest{}, values: mergedValues(t, c)}
	for _, m := range all {
		r.kinds[m.Kind] = append(r.kinds[m.Kind], m)
		if m.Metadata.Namespace != helmNamespace {
			t.Errorf("%s: namespace %q, want the release's %q", m, m.Metadata.Namespace, helmNamespace)
		}
	}
	r.hpas = r.kinds["HorizontalPodAutoscaler"]
	// The Secrets exist before the chart is installed; the chart never makes one. Stand in for them with
	// a value for every key the pods read, so the configuration loads as in the pod.
	if len(r.kinds["Secret"]) > 0 {
		t.Errorf("%s: the chart renders a Secret: secrets must come from existing ones", c.name)
	}
	for _, e := range r.edgeq.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		s := r.secrets[ref.Name]
		if s.StringData == nil {
			s.StringData = map[string]string{}
		}
		s.StringData[ref.Key] = fakeSecret(e.Name)
		r.secrets[ref.Name] = s
	}
	return r
}

// fakeSecret is a value of the right shape for a secret's environment variable.
func fakeSecret(env string) string {
	switch env {
	case config.EnvName("ledger.postgres_url"):
		return "postgres://edgeq:password@postgres.db:5432/edgeq?sslmode=require"
	case config.EnvName("tracing.headers"):
		return "authorization=Bearer test-token"
	}
	return "test-" + strings.ToLower(env)
}

// mergedValues reads values.yaml with a case's values over it, as helm merges them: its -f file decoded
// over values.yaml, then the few --set keys the cases use.
func mergedValues(t *testing.T, c helmCase) chartValues {
	t.Helper()
	var v chartValues
	read := func(file string) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	read(chartDir + "/values.yaml")
	for i := 0; i < len(c.args); i += 2 {
		switch c.args[i] {
		case "-f":
			// Maps merge key by key in helm; decoding over the same struct does the same for these fields,
			// except secrets, whose items must then be given whole (they are, in the values file).
			read(c.args[i+1])
		case "--set":
			key, value, _ := strings.Cut(c.args[i+1], "=")
			list := strings.Split(strings.Trim(value, "{}"), ",")
			switch key {
			case "redis.sentinel.masterName":
				v.Redis.Sentinel.MasterName = value
			case "redis.sentinel.addrs":
				v.Redis.Sentinel.Addrs = list
			case "redis.cluster.addrs":
				v.Redis.Cluster.Addrs = list
			case "redis.waitReplicas":
				v.Redis.WaitReplicas, _ = strconv.Atoi(value)
			case "autoscaling.enabled":
				v.Autoscaling.Enabled = value == "true"
			default:
				t.Fatalf("mergedValues does not know --set %s", key)
			}
		}
	}
	return v
}

// chartMetadata is the chart's Chart.yaml.
type chartMetadata struct {
	APIVersion  string `yaml:"apiVersion"`
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	KubeVersion string `yaml:"kubeVersion"`
}

func chartMeta(t *testing.T) chartMetadata {
	t.Helper()
	data, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m chartMetadata
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return m
}

// dockerfileCmd is the Dockerfile's CMD (exec form).
func dockerfileCmd(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CMD\s+(\[.*\])\s*$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the Dockerfile has no CMD in exec form")
	}
	var cmd []string
	if err := yaml.Unmarshal(m[1], &cmd); err != nil {
		t.Fatalf("Dockerfile CMD %s: %v", m[1], err)
	}
	return cmd
}

func TestHelm_ChartIsNamedAndVersioned(t *testing.T) {
	m := chartMeta(t)
	if m.APIVersion != "v2" || m.Name != "edgeq" {
		t.Errorf("Chart.yaml: apiVersion %q name %q, want v2 and edgeq", m.APIVersion, m.Name)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(m.AppVersion) || m.Version == "" {
		t.Errorf("Chart.yaml: version %q appVersion %q: want a chart version and an edgeq release X.Y.Z", m.Version, m.AppVersion)
	}
	if m.KubeVersion == "" {
		t.Error("Chart.yaml has no kubeVersion: the preStop sleep action needs Kubernetes 1.30")
	}
}

func TestHelm_AlertRulesAreACopyOfDeployPrometheus(t *testing.T) {
	want, err := os.ReadFile("prometheus/edgeq-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartDir + "/files/edgeq-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s/files/edgeq-alerts.yaml differs from prometheus/edgeq-alerts.yaml: the PrometheusRule would "+
			"carry other alerts than the rule file. Copy it: cp deploy/prometheus/edgeq-alerts.yaml deploy/%s/files/", chartDir, chartDir)
	}
}

// The chart has a way in for every configuration key edgeq keeps secret.
func TestHelm_EverySecretKeyHasAnExistingSecretValue(t *testing.T) {
	secretKeys := taggedSecretKeys(reflect.TypeFor[config.Config](), "")
	if len(secretKeys) == 0 {
		t.Fatal(`no configuration field is tagged secret:"true"`)
	}
	values := mergedValues(t, helmCase{})
	byEnv := map[string]string{} // environment variable -> secrets item
	for name := range values.Secrets {
		if env, ok := chartSecretEnv[name]; ok {
			byEnv[env] = name
		}
	}
	for _, key := range secretKeys {
		if _, ok := byEnv[config.EnvName(key)]; !ok {
			t.Errorf("%s is a secret of edgeq's configuration, but the chart's values have no secrets item for it "+
				"(%s from an existing Secret): add one to values.yaml, the env of templates/deployment.yaml and chartSecretEnv",
				key, config.EnvName(key))
		}
	}
	for name, item := range values.Secrets {
		if item.Key == "" {
			t.Errorf("values.yaml: secrets.%s.key is empty", name)
		}
	}
}

// chartSecretEnv is the environment variable each secrets item of values.yaml becomes (the signing key
// is a file instead).
var chartSecretEnv = map[string]string{
	"adminApiKey":        config.EnvName("admin.api_key"),
	"identitySecret":     config.EnvName("identity.secret"),
	"redisPassword":      config.EnvName("redis.password"),
	"turnstileSecretKey": config.EnvName("turnstile.secret_key"),
	"ledgerPostgresURL":  config.EnvName("ledger.postgres_url"),
	"tracingHeaders":     config.EnvName("tracing.headers"),
}

// taggedSecretKeys lists the dotted keys of the fields tagged secret:"true".
func taggedSecretKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		if f.Tag.Get("secret") == "true" {
			out = append(out, key)
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			out = append(out, taggedSecretKeys(f.Type, key)...)
		}
	}
	return out
}

func TestHelm_LintPassesWithDefaultsAndWithEverythingEnabled(t *testing.T) {
	for _, c := range helmCases() {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", "--kube-version", helmKubeVersion, chartDir}, c.args...)
			if out, err := runHelm(t, args...); err != nil {
				t.Fatalf("%v", err)
			} else if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

func TestHelm_ConfigurationLoadsWithEdgeqsLoader(t *testing.T) {
	for _, c := range helmCases() {
		t.Run(c.name, func(t *testing.T) {
			r := renderChart(t, c)
			if got := r.configPath(t); got != "/etc/edgeq/config.yaml" {
				t.Errorf("-config %s, want /etc/edgeq/config.yaml (the ConfigMap is the directory /etc/edgeq)", got)
			}
			if args, cmd := r.edgeq.Args, dockerfileCmd(t); !slices.Equal(args, cmd) {
				t.Errorf("the container runs %q, the Dockerfile's CMD is %q", args, cmd)
			}
			// The ConfigMap mounted at /etc/edgeq without subPath, its config.yaml loaded with the
			// secrets' variables set as the Deployment sets them.
			cfg, file := r.loadedConfig(t)

			for _, key := range taggedSecretKeys(reflect.TypeFor[config.Config](), "") {
				if v := r.rawConfigValue(t, key); v != "" {
					t.Errorf("the ConfigMap sets %s: secrets belong in Secrets", key)
				}
			}
			for name, env := range chartSecretEnv {
				item := r.values.Secrets[name]
				got := envOf(r.edgeq, env)
				switch {
				case item.ExistingSecret == "" && got != nil:
					t.Errorf("%s is set though secrets.%s.existingSecret is empty", env, name)
				case item.ExistingSecret == "":
				case got == nil || got.ValueFrom == nil || got.ValueFrom.SecretKeyRef == nil:
					t.Errorf("%s is not taken from Secret %s", env, item.ExistingSecret)
				case got.ValueFrom.SecretKeyRef.Name != item.ExistingSecret || got.ValueFrom.SecretKeyRef.Key != item.Key:
					t.Errorf("%s comes from Secret %s key %s, want secrets.%s: %s key %s", env,
						got.ValueFrom.SecretKeyRef.Name, got.ValueFrom.SecretKeyRef.Key, name, item.ExistingSecret, item.Key)
				}
			}
			if v := r.values.Secrets["turnstileSecretKey"]; v.ExistingSecret != "" && cfg.Turnstile.SecretKey != fakeSecret("EDGEQ_TURNSTILE_SECRET_KEY") {
				t.Errorf("turnstile.secret_key is %q, not the Secret's value", cfg.Turnstile.SecretKey)
			}

			// The signing key: a file from the named Secret, mounted as a directory where
			// tokens.signing_key_file looks.
			keyFile := cfg.Tokens.SigningKeyFile
			vol, subPath, ok := r.mountOf(path.Dir(keyFile))
			switch {
			case keyFile == "":
				t.Error("tokens.signing_key_file is empty: every replica would sign with a key of its own")
			case !ok || vol.Secret == nil:
				t.Errorf("tokens.signing_key_file %s: no Secret volume is mounted at %s", keyFile, path.Dir(keyFile))
			case subPath != "":
				t.Errorf("the signing key is mounted with subPath %q: a rotated key would never reach the pod", subPath)
			case path.Dir(keyFile) == "/etc/edgeq" || strings.HasPrefix(path.Dir(keyFile), "/etc/edgeq/"):
				t.Errorf("the signing key is mounted inside the ConfigMap's directory /etc/edgeq")
			default:
				want := r.values.Secrets["signingKey"]
				if vol.Secret.SecretName != want.ExistingSecret {
					t.Errorf("the signing key comes from Secret %s, want secrets.signingKey.existingSecret %s", vol.Secret.SecretName, want.ExistingSecret)
				}
				if !slices.ContainsFunc(vol.Secret.Items, func(it struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				}) bool {
					return it.Key == want.Key && it.Path == path.Base(keyFile)
				}) {
					t.Errorf("Secret volume items %+v do not put key %s at %s", vol.Secret.Items, want.Key, path.Base(keyFile))
				}
			}

			checkListenersAndServices(t, r, cfg)
			checkRedis(t, r, cfg)

			// `edgeq check` accepts the file too, with a real key in place of the mounted one.
			key, err := token.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			pem, err := token.MarshalPrivateKey(key)
			if err != nil {
				t.Fatal(err)
			}
			keyPath := filepath.Join(t.TempDir(), "signing.pem")
			if err := os.WriteFile(keyPath, pem, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("EDGEQ_TOKENS_SIGNING_KEY_FILE", keyPath)
			problems, warnings, err := server.Check(file)
			if err != nil || len(problems) > 0 {
				t.Errorf("edgeq check: %v %v", err, problems)
			}
			if r.values.Redis.WaitReplicas > 0 {
				for _, w := range warnings {
					if strings.Contains(w, "redis.wait_replicas") {
						t.Errorf("edgeq check still warns about redis.wait_replicas: %s", w)
					}
				}
			}
		})
	}
}

func envOf(c container, name string) *envVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// checkListenersAndServices: the listeners are the container's ports, the public Service sends to
// server.listen, the admin Service (ClusterIP) to admin.listen, whose allowed_hosts name it.
func checkListenersAndServices(t *testing.T, r renderedChart, cfg *config.Config) {
	t.Helper()
	c := r.edgeq
	adminHost, adminPort := portOf(t, "admin.listen", cfg.Admin.Listen)
	_, publicPort := portOf(t, "server.listen", cfg.Server.Listen)
	if adminPort != 9090 || adminHost != "" {
		t.Errorf("admin.listen %q, want :9090 (the image's admin port, on every interface for the probes)", cfg.Admin.Listen)
	}
	if publicPort != 8080 {
		t.Errorf("server.listen %q, want :8080 (the image's public port)", cfg.Server.Listen)
	}
	ports := map[int]bool{}
	for _, p := range c.Ports {
		ports[p.ContainerPort] = true
	}
	if !ports[adminPort] || !ports[publicPort] {
		t.Errorf("container ports %+v lack %d or %d", c.Ports, publicPort, adminPort)
	}
	allowed := map[string]bool{}
	for _, h := range cfg.Admin.AllowedHosts {
		allowed[h] = true
	}
	podLabels := r.deploySpec.Template.Metadata.Labels
	var public, admin int
	for _, m := range r.kinds["Service"] {
		svc := specOf[struct {
			Type        string `yaml:"type"`
			serviceSpec `yaml:",inline"`
		}](t, m)
		if !selects(svc.Selector, podLabels) {
			continue
		}
		for _, p := range svc.Ports {
			switch c.port(p.TargetPort) {
			case publicPort:
				public++
			case adminPort:
				admin++
				if svc.Type != "" && svc.Type != "ClusterIP" {
					t.Errorf("Service %s exposes the admin port as %s: it must stay ClusterIP", m.Metadata.Name, svc.Type)
				}
				name := m.Metadata.Name
				for _, dns := range []string{name, name + "." + helmNamespace, name + "." + helmNamespace + ".svc",
					name + "." + helmNamespace + ".svc.cluster.local"} {
					if !allowed[dns] {
						t.Errorf("Service %s reaches the admin port, but admin.allowed_hosts %q lacks %s: it would get 421",
							name, cfg.Admin.AllowedHosts, dns)
					}
				}
			default:
				t.Errorf("Service %s: targetPort %+v is neither server.listen nor admin.listen", m.Metadata.Name, p.TargetPort)
			}
		}
	}
	if public != 1 || admin != 1 {
		t.Errorf("%d Services send to the public port and %d to the admin port, want one each", public, admin)
	}
}

// checkRedis: the configuration's store is the one the values chose, and the trial Redis, when chosen,
// is a Service of the release in front of a StatefulSet of redis:7.2.
func checkRedis(t *testing.T, r renderedChart, cfg *config.Config) {
	t.Helper()
	v := r.values.Redis
	got := cfg.Redis
	if got.WaitReplicas != v.WaitReplicas {
		t.Errorf("redis.wait_replicas %d, want redis.waitReplicas %d", got.WaitReplicas, v.WaitReplicas)
	}
	switch {
	case v.Trial.Enabled:
		host, port := portOf(t, "redis.addr", got.Addr)
		svc, ok := r.services[host]
		if !ok || !slices.ContainsFunc(svc.Ports, func(p servicePort) bool { return p.Port == port }) {
			t.Fatalf("redis.addr %q is not a Service and port of the release", got.Addr)
		}
		if len(r.redis) != 1 || !selects(svc.Selector, r.redis[0].Template.Metadata.Labels) {
			t.Fatalf("Service %s selects no trial Redis StatefulSet", host)
		}
		if selects(svc.Selector, r.deploySpec.Template.Metadata.Labels) {
			t.Errorf("Service %s selects the edgeq pods too", host)
		}
		c := r.redis[0].Template.Spec.Containers[0]
		if !strings.HasPrefix(c.Image, "redis:7.2") {
			t.Errorf("trial Redis image %q, want redis:7.2", c.Image)
		}
		if !slices.Contains(c.Args, "--appendonly") || !slices.Contains(c.Args, "noeviction") {
			t.Errorf("trial Redis args %q: want the append-only file and noeviction", c.Args)
		}
	case len(v.Sentinel.Addrs) > 0:
		if got.MasterName != v.Sentinel.MasterName || !slices.Equal(got.Addrs, v.Sentinel.Addrs) || got.Addr != "" {
			t.Errorf("redis %+v, want Sentinel %s at %q", got, v.Sentinel.MasterName, v.Sentinel.Addrs)
		}
	case len(v.Cluster.Addrs) > 0:
		if got.MasterName != "" || !slices.Equal(got.Addrs, v.Cluster.Addrs) || got.Addr != "" {
			t.Errorf("redis %+v, want Cluster at %q", got, v.Cluster.Addrs)
		}
	default:
		if got.Addr != v.Addr || len(got.Addrs) > 0 {
			t.Errorf("redis.addr %q addrs %q, want redis.addr %q", got.Addr, got.Addrs, v.Addr)
		}
	}
	if !v.Trial.Enabled && (len(r.redis) > 0 || len(r.kinds["StatefulSet"]) > 0) {
		t.Error("a StatefulSet is rendered though redis.trial.enabled is false")
	}
}

func TestHelm_PodIsVersionedProbedHardenedAndDrains(t *testing.T) {
	meta := chartMeta(t)
	for _, c := range helmCases() {
		t.Run(c.name, func(t *testing.T) {
			r := renderChart(t, c)
			spec, ct := r.deploySpec, r.edgeq

			want := r.values.Image.Repository + ":" + meta.AppVersion
			if r.values.Image.Tag != "" {
				want = r.values.Image.Repository + ":" + r.values.Image.Tag
			}
			if ct.Image != want || want != "ghcr.io/edgeq/edgeq:"+meta.AppVersion {
				t.Errorf("image %q, want ghcr.io/edgeq/edgeq:%s (the chart's appVersion)", ct.Image, meta.AppVersion)
			}

			for _, p := range []struct {
				name  string
				probe *probe
				path  string
			}{{"readinessProbe", ct.ReadinessProbe, "/readyz"}, {"livenessProbe", ct.LivenessProbe, "/healthz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: missing, want GET %s on the admin port 9090", p.name, p.path)
					continue
				}
				if p.probe.HTTPGet.Path != p.path || ct.port(p.probe.HTTPGet.Port) != 9090 {
					t.Errorf("%s: GET %s on port %d, want GET %s on the admin port 9090", p.name, p.probe.HTTPGet.Path, ct.port(p.probe.HTTPGet.Port), p.path)
				}
			}

			pod := spec.Template.Spec.SecurityContext
			if pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser == 0 {
				t.Errorf("the pod may run as root: runAsNonRoot %s, runAsUser %s", show(pod.RunAsNonRoot), show(pod.RunAsUser))
			}
			sc := ct.SecurityContext
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Error("readOnlyRootFilesystem is not true")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Error("allowPrivilegeEscalation is not false")
			}
			if !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Error("capabilities are not all dropped")
			}
			for _, res := range []string{"cpu", "memory"} {
				if ct.Resources.Requests[res] == "" {
					t.Errorf("no resources.requests.%s", res)
				}
			}

			// Draining: the kubelet's sleep (no shell in the image), then SIGTERM, the drain and the
			// last attempt at pending compensations, all inside the grace period.
			if ct.Lifecycle == nil || ct.Lifecycle.PreStop == nil || ct.Lifecycle.PreStop.Sleep == nil {
				t.Fatal("no lifecycle.preStop.sleep: the load balancer would still send to a stopping pod")
			}
			preStop := time.Duration(ct.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			if preStop != time.Duration(r.values.Drain.PreStopSleepSeconds)*time.Second || preStop <= 0 {
				t.Errorf("preStop sleep %s, want drain.preStopSleepSeconds %d s", preStop, r.values.Drain.PreStopSleepSeconds)
			}
			cfg, _ := r.loadedConfig(t)
			grace := spec.Template.Spec.TerminationGracePeriodSeconds
			if grace == nil || time.Duration(*grace)*time.Second <= preStop+cfg.Server.ShutdownTimeout+admission.FinalAttempt {
				t.Errorf("terminationGracePeriodSeconds %s is not above the preStop sleep %s plus server.shutdown_timeout %s plus %s for pending compensations",
					show(grace), preStop, cfg.Server.ShutdownTimeout, admission.FinalAttempt)
			}
			strategy := specOf[struct {
				Strategy struct {
					Type          string `yaml:"type"`
					RollingUpdate struct {
						MaxUnavailable *intOrString `yaml:"maxUnavailable"`
					} `yaml:"rollingUpdate"`
				} `yaml:"strategy"`
			}](t, r.deployment).Strategy
			if strategy.Type != "RollingUpdate" || strategy.RollingUpdate.MaxUnavailable == nil || strategy.RollingUpdate.MaxUnavailable.Int != 0 ||
				strategy.RollingUpdate.MaxUnavailable.String != "" {
				t.Errorf("strategy %+v: want a RollingUpdate with maxUnavailable 0 (a new pod ready before an old one stops)", strategy)
			}

			// Replicas: the count, or the HorizontalPodAutoscaler's.
			if r.values.Autoscaling.Enabled {
				if spec.Replicas != nil {
					t.Errorf("replicas %d is set beside the HorizontalPodAutoscaler: every upgrade would reset it", *spec.Replicas)
				}
				if len(r.hpas) != 1 {
					t.Fatalf("%d HorizontalPodAutoscalers, want 1", len(r.hpas))
				}
				target := specOf[struct {
					ScaleTargetRef struct {
						Kind string `yaml:"kind"`
						Name string `yaml:"name"`
					} `yaml:"scaleTargetRef"`
					MinReplicas int `yaml:"minReplicas"`
				}](t, r.hpas[0])
				if target.ScaleTargetRef.Kind != "Deployment" || target.ScaleTargetRef.Name != r.deployment.Metadata.Name || target.MinReplicas < 2 {
					t.Errorf("the HorizontalPodAutoscaler scales %+v, want the Deployment %s from at least 2", target, r.deployment.Metadata.Name)
				}
			} else {
				if spec.Replicas == nil || *spec.Replicas != r.values.ReplicaCount {
					t.Errorf("replicas %s, want replicaCount %d", show(spec.Replicas), r.values.ReplicaCount)
				}
				if len(r.hpas) > 0 {
					t.Error("a HorizontalPodAutoscaler is rendered though autoscaling.enabled is false")
				}
			}

			if len(r.pdbs) != 1 {
				t.Fatalf("%d PodDisruptionBudgets, want 1", len(r.pdbs))
			}
			pdb := r.pdbs[0]
			if !selects(pdb.Selector.MatchLabels, spec.Template.Metadata.Labels) {
				t.Errorf("the PodDisruptionBudget's selector %v does not pick the edgeq pods", pdb.Selector.MatchLabels)
			}
			if !selects(spec.Selector.MatchLabels, spec.Template.Metadata.Labels) {
				t.Errorf("the Deployment's selector %v does not pick its pods", spec.Selector.MatchLabels)
			}
		})
	}
}

func TestHelm_PrometheusOperatorObjects(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		r := renderChart(t, helmCases()[0])
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "HorizontalPodAutoscaler", "StatefulSet"} {
			if len(r.kinds[kind]) > 0 {
				t.Errorf("the default values render a %s", kind)
			}
		}
	})
	t.Run("enabled", func(t *testing.T) {
		r := renderChart(t, helmCase{"everything enabled", []string{"-f", everythingValues}})
		if !r.values.Metrics.ServiceMonitor.Enabled || !r.values.Metrics.PrometheusRule.Enabled {
			t.Fatalf("%s does not enable the ServiceMonitor and the PrometheusRule", everythingValues)
		}

		// The ServiceMonitor scrapes the admin Service's port, in the job the alerts name.
		if len(r.kinds["ServiceMonitor"]) != 1 {
			t.Fatalf("%d ServiceMonitors, want 1", len(r.kinds["ServiceMonitor"]))
		}
		sm := specOf[struct {
			Selector  labelSelector `yaml:"selector"`
			Endpoints []struct {
				Port        string `yaml:"port"`
				Path        string `yaml:"path"`
				Relabelings []struct {
					Action       string   `yaml:"action"`
					SourceLabels []string `yaml:"sourceLabels"`
					TargetLabel  string   `yaml:"targetLabel"`
					Replacement  string   `yaml:"replacement"`
				} `yaml:"relabelings"`
			} `yaml:"endpoints"`
		}](t, r.kinds["ServiceMonitor"][0])
		var picked []string
		for _, m := range r.kinds["Service"] {
			if !selects(sm.Selector.MatchLabels, m.Metadata.Labels) {
				continue
			}
			picked = append(picked, m.Metadata.Name)
			svc := r.services[m.Metadata.Name]
			for _, e := range sm.Endpoints {
				i := slices.IndexFunc(svc.Ports, func(p servicePort) bool { return p.Name == e.Port })
				if i < 0 || r.edgeq.port(svc.Ports[i].TargetPort) != 9090 {
					t.Errorf("ServiceMonitor endpoint port %q is not Service %s's way to the admin port 9090", e.Port, m.Metadata.Name)
				}
				if e.Path != "/metrics" {
					t.Errorf("ServiceMonitor endpoint path %q, want /metrics", e.Path)
				}
				job := slices.ContainsFunc(e.Relabelings, func(rl struct {
					Action       string   `yaml:"action"`
					SourceLabels []string `yaml:"sourceLabels"`
					TargetLabel  string   `yaml:"targetLabel"`
					Replacement  string   `yaml:"replacement"`
				}) bool {
					return rl.TargetLabel == "job" && rl.Replacement == "edgeq" && len(rl.SourceLabels) == 0 &&
						(rl.Action == "" || rl.Action == "replace")
				})
				if !job {
					t.Errorf("ServiceMonitor endpoint %q does not set job=\"edgeq\", the job the alerts select", e.Port)
				}
			}
		}
		if len(picked) != 1 || picked[0] != r.deployment.Metadata.Name+"-admin" {
			t.Errorf("the ServiceMonitor selects Services %q, want the admin Service alone (one target per pod)", picked)
		}

		// The PrometheusRule carries deploy/prometheus/edgeq-alerts.yaml's groups, unchanged.
		if len(r.kinds["PrometheusRule"]) != 1 {
			t.Fatalf("%d PrometheusRules, want 1", len(r.kinds["PrometheusRule"]))
		}
		var rule struct {
			Spec map[string]any `yaml:"spec"`
		}
		if err := r.kinds["PrometheusRule"][0].node.Decode(&rule); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile("prometheus/edgeq-alerts.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var file map[string]any
		if err := yaml.Unmarshal(data, &file); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rule.Spec, file) {
			t.Errorf("the PrometheusRule's spec is not prometheus/edgeq-alerts.yaml:\n got %v\nwant %v", rule.Spec, file)
		}
		if groups, _ := rule.Spec["groups"].([]any); len(groups) == 0 {
			t.Error("the PrometheusRule has no groups")
		}
	})
}

// Values that would break edgeq are refused when the chart is rendered, with a message naming them.
func TestHelm_RefusesValuesThatWouldBreakEdgeq(t *testing.T) {
	type refusal struct {
		set  []string
		want string
	}
	var cases []refusal
	// Every key edgeq keeps secret, written into config.
	for _, key := range taggedSecretKeys(reflect.TypeFor[config.Config](), "") {
		cases = append(cases, refusal{[]string{"config." + key + "=hunter2"}, "config." + key + " is a secret"})
	}
	for _, c := range append(cases, []refusal{
		{[]string{"drain.terminationGracePeriodSeconds=30"}, "drain.terminationGracePeriodSeconds 30 is not above"},
		{[]string{"config.server.shutdown_timeout=60s", "drain.terminationGracePeriodSeconds=70"}, "is not above"},
		{[]string{"config.tokens.signing_key_file=/tmp/k.pem"}, "config.tokens.signing_key_file is set by the chart"},
		{[]string{"config.redis.addr=redis:6380"}, "config.redis.addr is set by the chart"},
		{[]string{"config.admin.listen=127.0.0.1:9090"}, "config.admin.listen must be"},
		{[]string{"secrets.signingKey.existingSecret="}, "every replica must sign with the same key"},
		{[]string{"redis.addr="}, "no Redis"},
		{[]string{"redis.sentinel.addrs={s:26379}"}, "redis.sentinel.masterName is not"},
		{[]string{"redis.sentinel.addrs={s:26379}", "redis.sentinel.masterName=m", "redis.cluster.addrs={c:6379}"}, "both set"},
		{[]string{"redis.trial.enabled=true", "redis.waitReplicas=1"}, "redis.waitReplicas needs replicas"},
		{[]string{"podDisruptionBudget.minAvailable=3"}, "node drains would hang"},
	}...) {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			var args []string
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			_, err := helmTemplate(t, args...)
			if err == nil {
				t.Fatalf("helm template --set %s rendered", strings.Join(c.set, " --set "))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the error does not say %q:\n%v", c.want, err)
			}
		})
	}
}
