package certstore

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/testutil/pebbletest"
	"github.com/edgeq/edgeq/internal/testutil/storetest"
)

// replica is one edgeq replica's certmagic: its own cache and ACME issuer, on the shared store.
type replica struct {
	cfg    *certmagic.Config
	issuer *certmagic.ACMEIssuer
}

func newReplica(t *testing.T, s *store.Store, pebble *pebbletest.Server) *replica {
	t.Helper()
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		Logger:           zap.NewNop(),
	})
	t.Cleanup(cache.Stop)
	st := New(s.Client, s.Keys)
	st.poll = 100 * time.Millisecond
	cfg = certmagic.New(cache, certmagic.Config{Storage: st, Logger: zap.NewNop(), OCSP: certmagic.OCSPConfig{DisableStapling: true}})
	issuer := certmagic.NewACMEIssuer(cfg, certmagic.ACMEIssuer{
		CA: pebble.Directory, Email: "ops@example.com", Agreed: true, TrustedRoots: pebble.CAPool(t),
		DisableTLSALPNChallenge: true, AltHTTPPort: pebble.HTTPPort, Logger: zap.NewNop(),
	})
	cfg.Issuers = []certmagic.Issuer{issuer}
	return &replica{cfg: cfg, issuer: issuer}
}

// storedLeaf is the certificate the store holds for name, parsed.
func storedLeaf(t *testing.T, st *Storage, name string) *x509.Certificate {
	t.Helper()
	ctx := context.Background()
	keys, err := st.List(ctx, "certificates", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, "/"+name+".crt") {
			raw, err := st.Load(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(raw)
			leaf, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return leaf
		}
	}
	t.Fatalf("no certificate for %s in %q", name, keys)
	return nil
}

// Two replicas ask for the same certificate at once against a real ACME server (Pebble, validating
// HTTP-01 on a listener that only the second replica's challenge handler answers): one order is made,
// both end with the certificate the store holds, which chains to Pebble's root; a renewal by one
// replica makes a new certificate the other one loads from the store.
func TestStorage_TwoReplicasOneOrderAtPebble(t *testing.T) {
	pebble := pebbletest.Start(t)
	s := storetest.Redis(t)
	a, b := newReplica(t, s, pebble), newReplica(t, s, pebble)
	// The challenge listener: whichever replica started the order, the answer comes from the store.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(pebble.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.issuer.HandleHTTPChallenge(w, r) {
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*replica{a, b} {
		wg.Go(func() { errs[i] = r.cfg.ObtainCertSync(ctx, "shop.test") })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("obtaining: %v / %v\n%s", errs[0], errs[1], pebble.Log())
	}
	if n := pebble.Issued(); n != 1 {
		t.Fatalf("Pebble issued %d certificates for two replicas, want 1", n)
	}
	leaf := storedLeaf(t, New(s.Client, s.Keys), "shop.test")
	for i, r := range []*replica{a, b} {
		c, err := r.cfg.CacheManagedCertificate(ctx, "shop.test")
		if err != nil || c.Leaf == nil || c.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
			t.Fatalf("replica %d serves %v (%v), the store holds %v", i, c.Leaf, err, leaf.SerialNumber)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "shop.test", Roots: pebble.Roots(t), Intermediates: intermediates(t, s)}); err != nil {
		t.Fatalf("the certificate does not chain to Pebble's root: %v", err)
	}

	if err := a.cfg.RenewCertSync(ctx, "shop.test", true); err != nil {
		t.Fatalf("renewing: %v\n%s", err, pebble.Log())
	}
	if n := pebble.Issued(); n != 2 {
		t.Fatalf("Pebble issued %d certificates after one renewal, want 2", n)
	}
	renewed := storedLeaf(t, New(s.Client, s.Keys), "shop.test")
	if renewed.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Fatal("the renewal left the same certificate in the store")
	}
	c, err := b.cfg.CacheManagedCertificate(ctx, "shop.test")
	if err != nil || c.Leaf.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("the other replica loads %v (%v), want the renewed %v", c.Leaf, err, renewed.SerialNumber)
	}
}

// intermediates are the chain certificates the store holds with the leaf.
func intermediates(t *testing.T, s *store.Store) *x509.CertPool {
	t.Helper()
	st := New(s.Client, s.Keys)
	pool := x509.NewCertPool()
	keys, _ := st.List(context.Background(), "certificates", true)
	for _, k := range keys {
		if strings.HasSuffix(k, ".crt") {
			raw, _ := st.Load(context.Background(), k)
			pool.AppendCertsFromPEM(raw)
		}
	}
	return pool
}
