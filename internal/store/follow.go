package store

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Follow hands deliver the payload of every message published on channel, in order, until ctx ends or
// the client is closed: the one subscription loop of the packages that hear from other replicas
// (waitroom's token revocations, inflight's slot grants). deliver runs on Follow's goroutine.
//
// After a broken connection go-redis's PubSub connects and subscribes again by itself; what was
// published in between is lost, so every user has its own catch-up (the inlet tick reads the
// revocation set, a waiter polls), and Follow does nothing on a reconnect.
func Follow(ctx context.Context, client redis.UniversalClient, channel string, deliver func(payload string)) {
	sub := client.Subscribe(ctx, channel)
	defer func() { _ = sub.Close() }()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			deliver(msg.Payload)
		}
	}
}
