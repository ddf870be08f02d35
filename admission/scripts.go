package admission

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func script(name string) *redis.Script {
	b, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return redis.NewScript(string(b))
}

var (
	reserveScript = script("reserve.lua")
	releaseScript = script("release.lua")
	commitScript  = script("commit.lua")
	productScript = script("product.lua")
	restockScript = script("restock.lua")

	bidScript       = script("bid.lua")
	withdrawScript  = script("withdraw.lua")
	bidCommitScript = script("bidcommit.lua")
	auctionScript   = script("auction.lua")
)
