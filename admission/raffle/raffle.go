// Package raffle is a test-only admission kind, kept in its own package the way
// docs/architecture.md "Adding an admission kind" says a kind is added: a raffle entry, one per user
// per drawing while the drawing is open. It is linked into no binary; its tests run it through a whole
// edgeq (server.Run) with its route field, its codes and their texts in every language, its ledger
// table, `edgeq reconcile`, its report series, its admin views and its users' own listing.
//
// Everything it adds is registered from this package's init: the kind and its route field
// (admission.Register), its texts (templates.RegisterTexts), its report scope
// (report.RegisterScope), its ledger table (ledger.RegisterTable) and its section of the file,
// drawings: (config.RegisterSection).
package raffle

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgeq/edgeq/admission"
	"github.com/edgeq/edgeq/internal/config"
	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/report"
	"github.com/edgeq/edgeq/templates"
)

// Type is the routes' admission.type of the kind; Field is the route field naming the drawing.
const (
	Type  = "raffle"
	Field = "drawing"
	// Header carries an entry's id to the origin.
	Header = "Edgeq-Raffle-Entry-Id"
	// Scope is the kind's report scope: its drawings' series.
	Scope report.Kind = 'r'
)

// The kind's refusals, with their texts in every language (texts/<tag>.json).
var (
	ErrAlreadyEntered  = web.NewError(vocab.NewCode(http.StatusConflict, "ALREADY_ENTERED"), "You have entered this drawing already.")
	ErrDrawingNotFound = web.NewError(vocab.NewCode(http.StatusNotFound, "DRAWING_NOT_FOUND"), "There is no such drawing.")
)

//go:embed texts/*.json
var texts embed.FS

//go:embed raffle.lua
var source string

var script = admission.Script("raffle.lua", source)

func init() {
	admission.Register(30, config.AdmissionKind{Type: Type, Owner: Field, Fields: []string{Field}}, newKind)
	templates.RegisterTexts("the raffle admission kind", texts, "texts")
	report.RegisterScope(Scope, report.ScopeInfo{Name: "drawings", Noun: "drawing",
		Series: []string{report.Admitted, report.Committed, report.Released}})
	registerTable()
	registerSection()
}

// kind is the raffle: its admin table and the identity of its users' own listing.
type kind struct {
	admission.About
	s      *admission.Service
	table  *admission.AdminTable
	people atomic.Pointer[admission.MineIdentity]
}

// The capabilities it has, checked when it compiles.
var (
	_ admission.TabledKind   = (*kind)(nil)
	_ admission.MinedKind    = (*kind)(nil)
	_ admission.ViewedKind   = (*kind)(nil)
	_ admission.LedgeredKind = (*kind)(nil)
	_ admission.ReportedKind = (*kind)(nil)
	_ admission.SeededKind   = (*kind)(nil)
)

func newKind(s *admission.Service) admission.Kind {
	k := &kind{s: s, About: admission.About{Type: Type, OwnerNoun: Field, IDHeader: Header, Dead: "drawing.",
		Unknown: ErrDrawingNotFound, Codes: []*web.Error{ErrAlreadyEntered, ErrDrawingNotFound}}}
	day := func(d int64) string { return strconv.FormatInt(d, 10) }
	k.table = &admission.AdminTable{Owners: k.OwnersKey(),
		Records:     func(o string, d int64) string { return k.key(o, "rec@"+day(d)) },
		IDs:         func(o string, d int64) string { return k.key(o, "ids@"+day(d)) },
		Users:       func(o string) string { return k.key(o, "users") },
		UserPattern: `"user":"([^"]*)"`, UserOf: admission.JSONField("user"), TimeOf: recordTime}
	return k
}

// recordTime is a record's time (ms): when it was entered, or given back.
func recordTime(body string) int64 {
	return max(admission.JSONTime("entered_at")(body), admission.JSONTime("released_at")(body))
}

// key is one of a drawing's keys, under its hash tag.
func (k *kind) key(drawing, part string) string { return k.s.Keys().Entity("r", drawing, part) }

func (*kind) Value(string, bool) (int64, *web.Error) { return 1, nil }
func (*kind) Commits() bool                          { return true }
func (k *kind) Record(c admission.Claim) string      { return k.key(c.Owner, "entry:"+c.ID) }
func (k *kind) OwnersKey() string                    { return k.s.Keys().Global("raffle", "drawings") }
func (k *kind) SpellingsKey() string                 { return k.s.Keys().Global("raffle", "spellings") }
func (k *kind) Stream(drawing string) string         { return k.key(drawing, "events") }
func (k *kind) AdminTable() *admission.AdminTable    { return k.table }

func (k *kind) MineIdentity() *atomic.Pointer[admission.MineIdentity] { return &k.people }

// keys are raffle.lua's keys for c.
func (k *kind) keys(c admission.Claim) []string {
	return []string{k.key(c.Owner, "drawing"), k.key(c.Owner, "entrants"), k.Record(c), k.Stream(c.Owner)}
}

func (k *kind) Reserve(ctx context.Context, c admission.Claim) (*web.Error, error) {
	code, err := script.Run(ctx, k.s.Client(), k.keys(c), "enter", c.ID, c.User).Int64()
	switch {
	case err != nil:
		return nil, err
	case code == 0:
		return nil, nil
	case code == 1:
		return ErrDrawingNotFound, nil
	case code == 2, code == 3:
		return ErrAlreadyEntered, nil
	}
	return web.ErrStoreUnavailable.Because(fmt.Errorf("raffle.lua answered %d", code)), nil
}

func (k *kind) Release(ctx context.Context, c admission.Claim) (int64, error) {
	return script.Run(ctx, k.s.Client(), k.keys(c), "release", c.ID).Int64()
}

func (k *kind) Commit(ctx context.Context, c admission.Claim) error {
	return script.Run(ctx, k.s.Client(), k.keys(c), "commit", c.ID, "", k.ledgerOn()).Err()
}

// ledgerOn tells raffle.lua's commit whether to write a committed event (only the ledger reads it).
func (k *kind) ledgerOn() string {
	if k.s.Ledger() != nil {
		return "1"
	}
	return "0"
}

// Entry is an entry's admin record, as the admin view and the users' own listing show it.
type Entry struct {
	ID          string `json:"id"`
	Drawing     string `json:"drawing"`
	User        string `json:"user,omitempty"`
	State       string `json:"state"`
	EnteredAt   string `json:"entered_at,omitempty"`
	ReleasedAt  string `json:"released_at,omitempty"`
	CommittedAt string `json:"committed_at,omitempty"`
}

// event reads one stream entry: its type, the entry and the time (ms). A batched commit
// (commits.lua) names the id in its "bid" field and the time in "committed_at".
func event(msg redis.XMessage) (typ, id, user string, at time.Time, err error) {
	e := admission.Entry(msg)
	typ, id, user = e.Str("type"), e.Str("entry"), e.Str("user")
	stamp := "at"
	if typ == "committed" {
		id, stamp = cmp.Or(id, e.Str("bid")), "committed_at"
	}
	ms, perr := e.Num(stamp)
	if id == "" || perr != nil || (typ != "admitted" && typ != "released" && typ != "committed") {
		return "", "", "", time.Time{}, fmt.Errorf("malformed raffle event %s: %v", msg.ID, msg.Values)
	}
	return typ, id, user, time.UnixMilli(ms).UTC(), nil
}

// Parse makes the admin record of an entry: entered, then released or committed (a record the
// worker rewrites whole, so a late event never moves it back).
func (k *kind) Parse(drawing string, msg redis.XMessage) ([]admission.Application, error) {
	typ, id, user, at, err := event(msg)
	if err != nil {
		return nil, err
	}
	e := Entry{ID: id, Drawing: drawing, User: user, State: typ}
	switch typ {
	case "admitted":
		e.EnteredAt = vocab.FormatTime(at)
	case "released":
		e.ReleasedAt = vocab.FormatTime(at)
	case "committed":
		// Only the ledger needs it; the record keeps "admitted" until given back, as stock's does.
		return nil, nil
	}
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return []admission.Application{{Table: k.table, Owner: drawing, ID: id, User: user, Body: body,
		Overwrite: typ == "released"}}, nil
}

// The report: an entry counts one in "admitted", its settlement one in "committed" or "released".
func (*kind) ReportScope() report.Kind                       { return Scope }
func (*kind) ReportAdmitted(admission.Claim) (string, int64) { return report.Admitted, 1 }
func (*kind) ReportSettled(admission.Claim) int64            { return 1 }
func (*kind) ReportExtra(string) report.Extra                { return report.Extra{} }
