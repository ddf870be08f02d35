package bid

import (
	"embed"
	"strconv"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/store"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is one of the kind's scripts after the admission library (admission.Scripts).
var script = admission.Scripts(scriptFiles)

// The bid scripts.
var (
	bidScript       = script("bid.lua")
	withdrawScript  = script("withdraw.lua")
	bidCommitScript = script("bidcommit.lua")
	auctionScript   = script("auction.lua")
)

// tag is the auctions' hash tag letter: an auction's keys carry {a:<id>}.
const tag = "a"

func auctionInfoKey(k store.Keys, auction string) string    { return k.Entity(tag, auction, "info") }
func auctionHighestKey(k store.Keys, auction string) string { return k.Entity(tag, auction, "highest") }
func auctionBidsKey(k store.Keys, auction string) string    { return k.Entity(tag, auction, "bids") }
func auctionBiddersKey(k store.Keys, auction string) string { return k.Entity(tag, auction, "bidders") }
func auctionEventsKey(k store.Keys, auction string) string  { return k.Entity(tag, auction, "events") }
func bidRecordKey(k store.Keys, auction, bid string) string {
	return k.Entity(tag, auction, "bid:"+bid)
}

// The admin records of an auction's bids (admission/records.go), written by the event worker: each day's bids'
// JSON (hash: id -> JSON), their ids in the order applied (list) and each bidder's ids (hash).
func bidRecordsKey(k store.Keys, auction string, day int64) string {
	return k.Entity(tag, auction, "rec@"+strconv.FormatInt(day, 10))
}
func bidIDsKey(k store.Keys, auction string, day int64) string {
	return k.Entity(tag, auction, "ids@"+strconv.FormatInt(day, 10))
}
func biddersKey(k store.Keys, auction string) string { return k.Entity(tag, auction, "users") }

// bidKeys are the KEYS of bid.lua, withdraw.lua and bidcommit.lua.
func bidKeys(k store.Keys, auction, bid string) []string {
	return []string{auctionInfoKey(k, auction), auctionHighestKey(k, auction), auctionBidsKey(k, auction),
		auctionBiddersKey(k, auction), bidRecordKey(k, auction, bid), auctionEventsKey(k, auction)}
}

// The index of auctions.
func auctionIndexKey(k store.Keys) string { return k.Global("adm", "auctions") }

// auctionSpellingsKey: the spellings index of auctions (admission/spellings.go).
func auctionSpellingsKey(k store.Keys) string { return k.Global("adm", "spellings:auctions") }

// bidTable: the worker writes the bids' records (JSON).
func bidTable(k store.Keys) *admission.AdminTable {
	return &admission.AdminTable{Owners: auctionIndexKey(k),
		Records:     func(a string, day int64) string { return bidRecordsKey(k, a, day) },
		IDs:         func(a string, day int64) string { return bidIDsKey(k, a, day) },
		Users:       func(a string) string { return biddersKey(k, a) },
		UserPattern: `"bidder":"([^"]*)"`,
		UserOf:      admission.JSONField("bidder"),
		TimeOf:      admission.JSONTime("bid_at"),
		Old:         oldBidTable(k)}
}

func oldBidTable(k store.Keys) *admission.OldTable {
	return &admission.OldTable{Records: k.Global("adm", "bids"), ByTime: k.Global("adm", "bids_by_time"), ByUser: k.Global("adm", "bids_by_user"),
		UserField:    "bidder",
		LegacyRecord: func(id string) string { return k.Global("adm", "b:"+id) },
		LegacyUser:   func(user string) string { return k.Global("adm", "ubids:"+user) }}
}
