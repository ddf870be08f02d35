// Package deploy holds the files that run edgeq in production — Kubernetes manifests (kubernetes/), a
// Helm chart (helm/edgeq), Prometheus alerting rules and a scrape job (prometheus/), a Grafana
// dashboard (grafana/) and a systemd unit (systemd/) — and the tests that keep them honest: the
// manifests, and the chart as helm renders it, have the shape docs/deploy.md promises and carry a
// configuration the real loader accepts, and every metric the dashboard and the alerts use is one a
// running edgeq exports. One more keeps docs/architecture.md's package map whole: every package
// directory has its row (docs_test.go); another keeps the repository citing only what it holds: no
// issue numbers or sections of documents kept elsewhere (citations_test.go).
package deploy
