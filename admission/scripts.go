package admission

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is an admission script: lib.lua followed by the operation's file. It runs with EVALSHA
// (go-redis falls back to EVAL when Redis does not have it yet).
func script(name string) *redis.Script {
	return redis.NewScript(mustRead("lib.lua") + "\n" + mustRead(name))
}

func mustRead(name string) string {
	b, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time: only a build without the files gets here
	}
	return string(b)
}

// Stock scripts (stock.go, products.go) and bid scripts (bid.go, auctions.go).
var (
	reserveScript = script("reserve.lua")
	releaseScript = script("release.lua")
	commitScript  = script("commit.lua")
	cancelScript  = script("cancel.lua")
	productScript = script("product.lua")
	restockScript = script("restock.lua")

	bidScript       = script("bid.lua")
	withdrawScript  = script("withdraw.lua")
	bidCommitScript = script("bidcommit.lua")
	auctionScript   = script("auction.lua")

	applyScript   = redis.NewScript(mustRead("apply.lua"))   // the event worker's (worker.go)
	commitsScript = redis.NewScript(mustRead("commits.lua")) // batched commits (committer.go)
	trimScript    = redis.NewScript(mustRead("trim.lua"))    // the event streams' trim (trim.go)
	leaseScript   = script("lease.lua")                      // a replica's liveness lease (orphans.go)
	indexScript   = redis.NewScript(mustRead("index.lua"))   // the ids' index and spellings (spellings.go)
)
