package main

// The other proxies of the table (table.go), each run as its own process in front of the same
// origin when it is installed: nginx with upstream keepalive, and Caddy's reverse_proxy. Given the
// table's certificate (tlsbench.go), each also terminates TLS on a second port of the same process.

import (
	"crypto/tls"
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

// proxyURLs are the base URLs of a proxy process: tls is "" when it was started without a certificate.
type proxyURLs struct{ plain, tls string }

// startNginx runs nginx in front of the origin with upstream keepalive, as a proxy in production is;
// with cert, a second server block terminates TLS (listen ... ssl, HTTP/1.1) with the same proxying.
// TLS 1.3 is named because nginx before 1.23.4 offers TLS 1.2 at most by default; edgeq and Caddy
// offer 1.3, which wrk takes.
func startNginx(dir, originHost string, cert *benchCert) (proxyURLs, func(), error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return proxyURLs{}, nil, errors.New("not installed (Debian: apt-get install nginx)")
	}
	ports, err := freePorts(cert)
	if err != nil {
		return proxyURLs{}, nil, err
	}
	root := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(root, "logs"), 0o755); err != nil {
		return proxyURLs{}, nil, err
	}
	user := ""
	if os.Getuid() == 0 {
		user = "user root;"
	}
	const location = `
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }`
	tlsServer := ""
	if cert != nil {
		tlsServer = fmt.Sprintf(`
  server {
    listen 127.0.0.1:%d ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate %s;
    ssl_certificate_key %s;%s
  }`, ports[1], cert.certFile, cert.keyFile, location)
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
    listen 127.0.0.1:%d;%s
  }%s
}
`, user, root, root, root, root, originHost, ports[0], location, tlsServer)
	path := filepath.Join(root, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return proxyURLs{}, nil, err
	}
	return startProcess(exec.Command(bin, "-p", root, "-c", path, "-g", "daemon off;"), ports, cert)
}

// startCaddy runs Caddy's reverse_proxy in front of the origin (no admin endpoint, no automatic
// HTTPS); with cert, a second site on https:// serves it with `tls cert key` (Caddy's defaults
// otherwise: HTTP/1.1 and HTTP/2 by ALPN, HTTP/3 on the same UDP port).
func startCaddy(dir, originHost string, cert *benchCert) (proxyURLs, func(), error) {
	bin, err := exec.LookPath("caddy")
	if err != nil {
		return proxyURLs{}, nil, errors.New("not installed (Debian: apt-get install caddy)")
	}
	ports, err := freePorts(cert)
	if err != nil {
		return proxyURLs{}, nil, err
	}
	root := filepath.Join(dir, "caddy")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return proxyURLs{}, nil, err
	}
	conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\treverse_proxy %s\n}\n", ports[0], originHost)
	if cert != nil {
		conf += fmt.Sprintf("https://127.0.0.1:%d {\n\ttls %s %s\n\treverse_proxy %s\n}\n", ports[1], cert.certFile, cert.keyFile, originHost)
	}
	path := filepath.Join(root, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return proxyURLs{}, nil, err
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+root, "XDG_CONFIG_HOME="+root, "HOME="+root)
	return startProcess(cmd, ports, cert)
}

// freePorts returns a free port for the plain site, and one for the TLS site when there is a cert.
func freePorts(cert *benchCert) ([]int, error) {
	n := 1
	if cert != nil {
		n = 2
	}
	var ports []int
	for len(ports) < n {
		port, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		if len(ports) == 0 || ports[0] != port {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// startProcess starts a proxy and waits until its ports answer: the plain one, and the TLS one
// (ports[1]) with the table's certificate.
func startProcess(cmd *exec.Cmd, ports []int, cert *benchCert) (proxyURLs, func(), error) {
	// Its own process group, ended as one: nginx's workers outlive a killed master otherwise.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	urls := proxyURLs{plain: "http://127.0.0.1:" + strconv.Itoa(ports[0])}
	client := &http.Client{Timeout: time.Second}
	if cert != nil {
		urls.tls = "https://127.0.0.1:" + strconv.Itoa(ports[1])
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.pool}}
	}
	p, err := proc.StartReady(cmd, 10*time.Second, 50*time.Millisecond, func() error {
		for _, base := range []string{urls.plain, urls.tls} {
			if base == "" {
				continue
			}
			resp, err := client.Get(base + "/page")
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s/page: %d", base, resp.StatusCode)
			}
		}
		return nil
	})
	if err != nil {
		return proxyURLs{}, nil, fmt.Errorf("did not answer on port %v: %w", ports, err)
	}
	return urls, p.Kill, nil
}
