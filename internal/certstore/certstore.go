// Package certstore keeps the TLS certificates, ACME accounts and issuance locks of certmagic in
// edgeq's store (Redis, or the embedded store for one process), so that every replica serves the same
// certificates and a certificate is ordered once, whichever replica asks first.
//
// certmagic sees a file system of slash-separated keys ("certificates/<ca>/<name>/<name>.crt"). They
// are the fields of two hashes under one hash tag: the values, and when each was written. There are a
// few dozen of them (an account and three files per name), so listing a "directory" reads every field
// name. Locks are keys of their own, taken with SET NX and a random token, kept alive while held and
// let go by a compare-and-delete: a replica that dies holding one leaves it to expire after lockTTL.
package certstore

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/store/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// The scripts need neither the clock nor a lib.lua: each is one short step.
var (
	scripts      = luascript.From(scriptFiles, "scripts")
	deleteScript = scripts.Alone("delete.lua")
	renewScript  = scripts.Alone("renew.lua")
	unlockScript = scripts.Alone("unlock.lua")
)

// lockTTL is how long a lock outlives a holder that stopped renewing it (a replica killed while
// ordering a certificate); a live holder renews it every lockTTL/3. lockPoll is how often a waiter
// tries again.
const (
	lockTTL  = 30 * time.Second
	lockPoll = time.Second
)

// Storage is certmagic.Storage on edgeq's store.
type Storage struct {
	client redis.UniversalClient
	keys   store.Keys

	mu    sync.Mutex
	held  map[string]heldLock // name -> this process's token and renewal
	renew time.Duration       // lockTTL/3; shorter in tests
	ttl   time.Duration
	poll  time.Duration
}

type heldLock struct {
	token string
	stop  chan struct{}
}

var _ certmagic.Storage = (*Storage)(nil)

// New returns the storage of the store's certificates.
func New(client redis.UniversalClient, keys store.Keys) *Storage {
	return &Storage{client: client, keys: keys, held: map[string]heldLock{}, ttl: lockTTL, renew: lockTTL / 3,
		poll: lockPoll}
}

func (s *Storage) data() string               { return s.keys.Global("acme", "files") }
func (s *Storage) modified() string           { return s.keys.Global("acme", "modified") }
func (s *Storage) lockKey(name string) string { return s.keys.Global("acme", "lock:"+name) }

// Store writes value at key.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	if err := validKey(key); err != nil {
		return err
	}
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.data(), key, value)
		p.HSet(ctx, s.modified(), key, time.Now().UnixMilli())
		return nil
	})
	return err
}

// Load reads the value at key; fs.ErrNotExist when there is none.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	v, err := s.client.HGet(ctx, s.data(), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("certstore: %s: %w", key, fs.ErrNotExist)
	}
	return v, err
}

// Delete removes key, or every key under it when it is a directory; a missing key is no error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	return deleteScript.Run(ctx, s.client, []string{s.data(), s.modified()}, key).Err()
}

// Exists reports whether key is a file or a directory.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	names, err := s.client.HKeys(ctx, s.data()).Result()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(names, func(n string) bool { return n == key || under(n, key) })
}

// List returns the keys under path: its direct children (files and directories), or with recursive
// every file and directory below it. A path that is neither a directory nor a file is fs.ErrNotExist.
func (s *Storage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	names, err := s.client.HKeys(ctx, s.data()).Result()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, n := range names {
		if path != "" && !under(n, path) {
			continue
		}
		rest := n
		base := ""
		if path != "" {
			rest, base = strings.TrimPrefix(n, path+"/"), path+"/"
		}
		parts := strings.Split(rest, "/")
		if !recursive {
			add(base + parts[0])
			continue
		}
		for i := range parts {
			add(base + strings.Join(parts[:i+1], "/"))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("certstore: %s: %w", path, fs.ErrNotExist)
	}
	slices.Sort(out)
	return out, nil
}

// Stat describes key: a file (with its size and when it was written) or a directory.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	var size *redis.IntCmd
	var at *redis.StringCmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		size = p.HStrLen(ctx, s.data(), key)
		at = p.HGet(ctx, s.modified(), key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return certmagic.KeyInfo{}, err
	}
	if ms, perr := strconv.ParseInt(at.Val(), 10, 64); perr == nil {
		return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(ms), Size: size.Val(), IsTerminal: true}, nil
	}
	if s.Exists(ctx, key) {
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, fmt.Errorf("certstore: %s: %w", key, fs.ErrNotExist)
}

// under reports whether name lies below dir, component by component ("a" holds "a/b", not "ab/c").
func under(name, dir string) bool {
	return strings.HasPrefix(name, dir+"/")
}

// validKey refuses what certmagic never writes: an empty key, or one with a leading or trailing slash.
func validKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("certstore: invalid key %q", key)
	}
	return nil
}

// Lock takes the named lock, waiting (and trying every lockPoll) while another holder has it, until ctx
// ends. The lock is kept alive until Unlock.
func (s *Storage) Lock(ctx context.Context, name string) error {
	for {
		ok, err := s.TryLock(ctx, name)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.poll):
		}
	}
}

// TryLock takes the named lock if nobody holds it.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	ok, err := s.client.SetNX(ctx, s.lockKey(name), token, s.ttl).Result()
	if err != nil || !ok {
		return false, err
	}
	h := heldLock{token: token, stop: make(chan struct{})}
	s.mu.Lock()
	s.held[name] = h
	s.mu.Unlock()
	go s.keepAlive(name, h) //nolint:gosec // the lock outlives the call that took it; Unlock stops the renewal
	return true, nil
}

func (s *Storage) keepAlive(name string, h heldLock) {
	t := time.NewTicker(s.renew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.renew)
			n, err := renewScript.Run(ctx, s.client, []string{s.lockKey(name)}, h.token, s.ttl.Milliseconds()).Int()
			cancel()
			if err == nil && n == 0 {
				return // lost (expired while this process could not renew it): nothing left to keep
			}
		}
	}
}

// Unlock lets the named lock go. A lock that expired and was taken by another holder is left to it.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h, ok := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("certstore: unlock %q: not held by this process", name)
	}
	close(h.stop)
	return unlockScript.Run(ctx, s.client, []string{s.lockKey(name)}, h.token).Err()
}

// String names the storage in certmagic's logs.
func (s *Storage) String() string { return "edgeq store " + s.data() }
