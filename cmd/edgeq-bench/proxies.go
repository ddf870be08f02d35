package main

// The other proxies of the table (table.go), each run as its own process in front of the same
// origin when it is installed: nginx with upstream keepalive, and Caddy's reverse_proxy.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/edgeq/edgeq/internal/testutil/proc"
)

// startNginx runs nginx in front of the origin with upstream keepalive, as a proxy in production is.
func startNginx(dir, originHost string) (string, func(), error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return "", nil, errors.New("not installed (Debian: apt-get install nginx)")
	}
	port, err := proc.FreePort()
	if err != nil {
		return "", nil, err
	}
	root := filepath.Join(dir, "nginx")
	os.MkdirAll(filepath.Join(root, "logs"), 0o755)
	user := ""
	if os.Getuid() == 0 {
		user = "user root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes 2;
pid %s/nginx.pid;
error_log %s/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %s/body;
  proxy_temp_path %s/proxy;
  upstream origin { server %s; keepalive 64; }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`, user, root, root, root, root, originHost, port)
	path := filepath.Join(root, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	return startProcess(exec.Command(bin, "-p", root, "-c", path, "-g", "daemon off;"), port)
}

// startCaddy runs Caddy's reverse_proxy in front of the origin (no TLS, no admin endpoint).
func startCaddy(dir, originHost string) (string, func(), error) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return "", nil, errors.New("not installed (Debian: apt-get install caddy)")
	}
	port, err := proc.FreePort()
	if err != nil {
		return "", nil, err
	}
	root := filepath.Join(dir, "caddy")
	os.MkdirAll(root, 0o755)
	conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\treverse_proxy %s\n}\n", port, originHost)
	path := filepath.Join(root, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+root, "XDG_CONFIG_HOME="+root, "HOME="+root)
	return startProcess(cmd, port)
}

// startProcess starts a proxy and waits until its port answers.
func startProcess(cmd *exec.Cmd, port int) (string, func(), error) {
	// Its own process group, ended as one: nginx's workers outlive a killed master otherwise.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: time.Second}
	p, err := proc.StartReady(cmd, 10*time.Second, 50*time.Millisecond, func() error {
		resp, err := client.Get(base + "/page")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /page: %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("did not answer on port %d: %w", port, err)
	}
	return base, p.Kill, nil
}
