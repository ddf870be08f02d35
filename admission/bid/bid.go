// Package bid is bid admission, an admission kind of its own package (docs/architecture.md "Adding
// an admission kind"): an auction's bid is accepted only if it beats the highest by the minimum
// increment. It owns its route fields' reading, its refusals and their texts in every language
// (texts/), its Lua (scripts/), its keys, its auctions (the configuration file's, pushed by the shop,
// or asked of auctions_source), its public reads, admin views and "mine" listing, its ledger rows
// and its report series. It registers itself from its init: an import links it.
package bid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/edgeq/edgeq/admission/bid/auctions"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/fields"
	"github.com/edgeq/edgeq/internal/group"
	"github.com/edgeq/edgeq/internal/money"
	"github.com/edgeq/edgeq/internal/store"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
)

// kind is bid admission (docs/reference.md "Bid admission"): one script accepts a bid only if it
// beats the highest by the minimum increment (the auction exists and runs, the bidder is not the
// owner); a bid the origin refuses is withdrawn and the previous highest restored.
type kind struct {
	admission.About
	s     *admission.Service
	reads auctionReads          // public auction reads (auctions.go)
	table *admission.AdminTable // the bids' admin records (admission/records.go)
	// bids groups every auction's bids into pipelines (package group, one key).
	bids *group.Batcher[struct{}, admission.Claim, placed]
	// source asks the shop about unknown auctions (auctions_source; nil when off); it follows
	// reloads. sourceMetrics are its metrics, whichever source is in force.
	source        atomic.Pointer[auctionSource]
	sourceMetrics *sourceMetrics
	// bidders is how GET {prefix}/auctions/mine identifies a bidder (admission/mine.go); follows reloads.
	bidders atomic.Pointer[admission.MineIdentity]
}

func init() {
	admission.Register(20, config.AdmissionKind{Type: auctions.Kind, Owner: "auction", Value: "amount",
		ValueRequired: true, Fields: []string{"auction", "amount"}}, newKind)
	registerTable()
}

func newKind(s *admission.Service) admission.Kind {
	k := &kind{About: admission.About{Type: auctions.Kind, OwnerNoun: "auction", IDHeader: Header, Dead: "auction.",
		Unknown: errAuctionNotFound, Codes: []*web.Error{errAuctionNotFound, errAuctionEnded, errSelfBid, errInvalidBid, errBidTooLow,
			errAuctionsSourceUnavailable}},
		s: s, reads: newAuctionReads(), table: bidTable(s.Keys()), sourceMetrics: newSourceMetrics()}
	k.bids = k.newBidder()
	if s.Registry() != nil {
		s.Registry().MustRegister(k.sourceMetrics.requests, k.sourceMetrics.breakerOpen)
	}
	return k
}

func (k *kind) Run(ctx context.Context)                               { k.bids.Run(ctx) }
func (k *kind) MineIdentity() *atomic.Pointer[admission.MineIdentity] { return &k.bidders }
func (k *kind) AdminTable() *admission.AdminTable                     { return k.table }

// Use puts auctions_source in force.
func (k *kind) Use(cfg *config.Config) error {
	k.useSource(auctions.SourceOf(cfg))
	return nil
}

// SourceDown: auctions_source could not be asked.
func (*kind) SourceDown() *web.Error { return errAuctionsSourceUnavailable }

// Header carries an accepted bid's id to the origin.
const Header = "Edgeq-Bid-Id"

// Value is the amount: a decimal string, as integer cents.
func (*kind) Value(text string, found bool) (int64, *web.Error) {
	if !found {
		return 0, errInvalidBid.With("field", "amount").Because(fmt.Errorf("no amount"))
	}
	cents, err := money.Parse(text)
	if err != nil || cents <= 0 {
		return 0, errInvalidBid.With("field", "amount").Because(fmt.Errorf("amount %q", fields.Clip(text)))
	}
	return cents, nil
}

func (k *kind) Reserve(ctx context.Context, c admission.Claim) (*web.Error, error) {
	code, highest, err := k.place(ctx, c)
	if err != nil {
		return nil, err // store.ErrNotAcked among them: the step withdraws the bid
	}
	return bidRefusal(code, highest), nil
}

// Discover asks auctions_source about an auction the store does not know (bid.lua refused before
// writing anything; the step first made sure it is no other spelling of a guarded auction, which the
// shop may answer for: admission/spellings.go). Known auctions never wait for the shop.
func (k *kind) Discover(ctx context.Context, auction string) (bool, *web.Error, error) {
	src := k.source.Load()
	if src == nil {
		return false, nil, nil
	}
	r := src.ensure(ctx, auction)
	if r.err != nil {
		return false, nil, fmt.Errorf("writing auction %s from auctions_source: %w", auction, r.err)
	}
	return r.found, r.e, nil
}

// Bids in pipelines. Each bid is its own bid.lua call (an auction's bids rarely meet in one
// instant, and each must see the highest the one before it left), but the bids of every auction that
// queued up while the last pipeline was on its way go in one pipeline (the bidder, package group:
// one key for all, so one pipeline per round trip), followed by one WAIT with redis.wait_replicas.
// One round trip then carries many bids, which is what Redis CPU per bid is mostly made of.

// bidBatchMax bounds one pipeline.
const bidBatchMax = 128

// placed is bid.lua's answer to one bid.
type placed struct {
	code, highest int64
	err           error // store.ErrNotAcked among them
}

// newBidder groups every auction's bids into pipelines (package group, one key).
func (k *kind) newBidder() *group.Batcher[struct{}, admission.Claim, placed] {
	return group.New(bidBatchMax, func(ctx context.Context, _ struct{}, cs []admission.Claim) ([]placed, error) {
		return k.placeNow(ctx, cs), nil
	})
}

// place runs bid.lua for one bid (in a pipeline with others while the bidder runs): its code and the
// highest amount. With redis.wait_replicas the replicas are waited for: an accepted bid they did not
// confirm in time comes with store.ErrNotAcked.
func (k *kind) place(ctx context.Context, c admission.Claim) (code, highest int64, err error) {
	p, err := k.bids.Do(ctx, struct{}{}, c)
	if err != nil {
		return 0, 0, err
	}
	return p.code, p.highest, p.err
}

// placeNow sends bids now, in one pipeline per master (store.RunAckedAll).
func (k *kind) placeNow(ctx context.Context, cs []admission.Claim) []placed {
	calls := make([]store.Call, len(cs))
	for i, c := range cs {
		calls[i] = store.Call{Keys: bidKeys(k.s.Keys(), c.Owner, c.ID), Args: []any{c.ID, c.User, c.Value, int64(admission.RecordTTL / time.Second)}}
	}
	cmds, errs := k.s.Store().RunAckedAll(ctx, bidScript, calls)
	out := make([]placed, len(cs))
	for i := range cs {
		out[i] = placedOf(cmds[i], errs[i])
	}
	return out
}

// placedOf reads one bid.lua call's answer.
func placedOf(cmd *redis.Cmd, err error) placed {
	notAcked := errors.Is(err, store.ErrNotAcked)
	if notAcked && cmd.Err() != nil {
		return placed{err: fmt.Errorf("bid: %w", err)} // NOREPLICAS: nothing written; the withdrawal leaves a tombstone
	}
	var res []int64
	if err == nil || notAcked {
		res, err = cmd.Int64Slice()
	}
	if err != nil || len(res) != 2 {
		return placed{err: fmt.Errorf("bid: %v %v", res, err)}
	}
	if notAcked && res[0] == 0 {
		return placed{code: res[0], highest: res[1], err: fmt.Errorf("bid: %w", store.ErrNotAcked)}
	}
	return placed{code: res[0], highest: res[1]}
}

// bidRefusal maps bid.lua's answer to a refusal, nil when accepted.
func bidRefusal(code, highest int64) *web.Error {
	switch code {
	case 0:
		return nil
	case 1:
		return errBidTooLow.With("highest_amount", money.Format(highest))
	case 2:
		return errAuctionNotFound
	case 3:
		return errAuctionEnded
	case 4:
		return errSelfBid
	case 5:
		return errInvalidBid.With("starting_price", money.Format(highest))
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("bid answered %d", code))
}

func (k *kind) Release(ctx context.Context, c admission.Claim) (int64, error) {
	return withdrawScript.Run(ctx, k.s.Client(), bidKeys(k.s.Keys(), c.Owner, c.ID), c.ID,
		int64(admission.RecordTTL/time.Second)).Int64()
}

// Commits: a bid the shop accepted is committed only for the ledger. Nothing withdraws a bid after
// the shop accepted it (a withdrawal follows the shop's refusal, or a store call whose answer was
// lost before the bid reached the shop), so with the ledger off a commit would write a state that
// nobody reads: one script call per bid saved on the auction's shard.
func (k *kind) Commits() bool { return k.s.Ledger() != nil }

func (k *kind) Commit(ctx context.Context, c admission.Claim) error {
	if !k.Commits() {
		return nil
	}
	return bidCommitScript.Run(ctx, k.s.Client(), bidKeys(k.s.Keys(), c.Owner, c.ID), c.ID, admission.Flag(k.s.Ledger() != nil)).Err()
}

func (k *kind) Record(c admission.Claim) string { return bidRecordKey(k.s.Keys(), c.Owner, c.ID) }

func (k *kind) Forget(auction string) { k.reads.forget(auction) }

// RefusalPage: a bidder whose bid is too low sees the highest bid and a way back to the auction.
func (*kind) RefusalPage(e *web.Error) string {
	if e.Code == errBidTooLow.Code {
		return "bidtoolow.html"
	}
	return ""
}

// Place runs bid.lua alone: what every bid admission costs the store, for the benchmark that
// compares it with bids through edgeq. user is already a pseudonym; the answer is bid.lua's code (0
// accepted, 1 too low, ...).
func Place(ctx context.Context, s *admission.Service, auction, user, id string, cents int64) (code int64, err error) {
	code, _, err = of(s).place(ctx, admission.Claim{Owner: auction, User: user, ID: id, Value: cents})
	return code, err
}

// Record is a bid as the admin API shows it (GET /api/users/{user}/bids), written by the worker.
type Record struct {
	ID          string `json:"id"`
	AuctionID   string `json:"auction_id"`
	Bidder      string `json:"bidder"` // pseudonym
	Amount      string `json:"amount"`
	State       string `json:"state"` // accepted, committed (ledger only), withdrawn
	BidAt       string `json:"bid_at"`
	WithdrawnAt string `json:"withdrawn_at,omitempty"`
	CommittedAt string `json:"committed_at,omitempty"` // only the ledger records it

	cents int64 // Amount in cents
}

func (k *kind) OwnersKey() string            { return auctionIndexKey(k.s.Keys()) }
func (k *kind) SpellingsKey() string         { return auctionSpellingsKey(k.s.Keys()) }
func (k *kind) Stream(auction string) string { return auctionEventsKey(k.s.Keys(), auction) }

// Parse reads an entry of an auction's stream (written by bid.lua, withdraw.lua and, with the ledger
// on, the commit scripts; a "committed" entry is for the ledger alone).
func (k *kind) Parse(auction string, msg redis.XMessage) ([]admission.Application, error) {
	rec, _, err := parseBid(auction, msg)
	if err != nil || rec.State == "committed" {
		return nil, err
	}
	app, err := k.application(rec)
	if err != nil {
		return nil, err
	}
	return []admission.Application{app}, nil
}

// parseBid reads an entry of an auction's stream into the bid it records (for a "committed" entry
// only its id and state) and the bid's time in milliseconds.
func parseBid(auction string, msg redis.XMessage) (Record, int64, error) {
	e := admission.Entry(msg)
	typ := e.Str("type")
	if typ == "committed" {
		c, err := e.Num("committed_at")
		if e.Str("bid") == "" || err != nil {
			return Record{}, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
		}
		return Record{ID: e.Str("bid"), AuctionID: auction, State: typ, CommittedAt: vocab.FormatUnixMilli(c)}, 0, nil
	}
	amount, err1 := e.Num("amount")
	at, err2 := e.Num("at")
	if typ != "bid" && typ != "withdrawn" || e.Str("bid") == "" || e.Str("user") == "" || errors.Join(err1, err2) != nil {
		return Record{}, 0, fmt.Errorf("malformed event %s: %v", msg.ID, msg.Values)
	}
	rec := Record{ID: e.Str("bid"), AuctionID: auction, Bidder: e.Str("user"), Amount: money.Format(amount),
		State: "accepted", BidAt: vocab.FormatUnixMilli(at), cents: amount}
	if typ == "withdrawn" {
		w, err := e.Num("withdrawn_at")
		if err != nil {
			return Record{}, 0, fmt.Errorf("malformed event %s: withdrawn_at", msg.ID)
		}
		rec.State, rec.WithdrawnAt = "withdrawn", vocab.FormatUnixMilli(w)
	}
	return rec, at, nil
}

// application is what a bid event writes, exactly once: the bid's JSON and its index entries. A
// "bid" entry never overwrites a record that exists: if a take-over made the withdrawal land first,
// the bid stays withdrawn.
func (k *kind) application(rec Record) (admission.Application, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return admission.Application{}, err
	}
	return admission.Application{Table: k.table, Owner: rec.AuctionID, ID: rec.ID, User: rec.Bidder, Body: body, Overwrite: rec.State == "withdrawn"}, nil
}

// RegisterPublic adds the public auction reads.
func (k *kind) RegisterPublic(mux *http.ServeMux) {
	p := k.s.Prefix()
	mux.HandleFunc("GET "+p+"/auctions/{id}/highest-bid", k.handleHighest)
	mux.HandleFunc("GET "+p+"/auctions/{id}/bids", k.handleHistory)
	mux.HandleFunc("GET "+p+"/auctions/{id}/stats", k.handleStats)
	mux.HandleFunc("POST "+p+"/bids/highest-bids/batch", k.handleBatch)
	mux.HandleFunc("GET "+p+"/auctions/mine", k.handleMine)
}

// RegisterAdmin adds the auction admin views.
func (k *kind) RegisterAdmin(admin *http.ServeMux) {
	admin.HandleFunc("PUT /api/auctions/{id}", k.adminPutAuction)
	admin.HandleFunc("GET /api/auctions/{id}", k.adminGetAuction)
	admin.HandleFunc("GET /api/auctions", k.adminListAuctions)
	admin.HandleFunc("GET /api/users/{user}/bids", k.adminUserBids)
}

// bid is the service's bid kind.
// of is s's bid kind.
func of(s *admission.Service) *kind { return s.Kind(auctions.Kind).(*kind) }

// The report: an auction's accepted bids; a settlement counts nothing.
func (*kind) ReportScope() report.Kind                       { return report.Auction }
func (*kind) ReportAdmitted(admission.Claim) (string, int64) { return report.Accepted, 1 }
func (*kind) ReportSettled(admission.Claim) int64            { return 0 }
func (*kind) ReportExtra(string) report.Extra                { return report.Extra{Firsts: report.Accepted} }
