package bid

import (
	"embed"
	"net/http"
	"time"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// The bid kind's codes (docs/reference.md "Bid admission", "Errors") and their texts in every
// language (texts/<tag>.json: a page's "msg.CODE" and "head.CODE").
var (
	errAuctionNotFound = web.NewError(vocab.NewCode(http.StatusNotFound, "AUCTION_NOT_FOUND"), "There is no such auction.")
	errAuctionEnded    = web.NewError(vocab.NewCode(http.StatusConflict, "AUCTION_ENDED"), "This auction has ended.")
	errSelfBid         = web.NewError(vocab.NewCode(http.StatusForbidden, "SELF_BID"), "You cannot bid on your own auction.")
	errInvalidBid      = web.NewError(vocab.NewCode(http.StatusBadRequest, "INVALID_BID"), "A bid is a positive amount with at most two decimals, at least the starting price.")
	errBidTooLow       = web.NewError(vocab.NewCode(http.StatusConflict, "BID_TOO_LOW"), "Your bid must beat the highest bid by at least the minimum increment.")
	// errAuctionsSourceUnavailable: a bid names an auction edgeq does not know, and the shop could not
	// be asked about it (auctions_source failing, or its circuit breaker open). Nothing was taken and
	// the shop's bid endpoint was not called. It tells the client to come back (Retry-After).
	errAuctionsSourceUnavailable = web.NewError(vocab.NewCode(http.StatusServiceUnavailable, "AUCTIONS_SOURCE_UNAVAILABLE"),
		"This auction's details cannot be fetched from the shop right now. Please try again in a moment.").WithRetryAfter(time.Second)
)

//go:embed texts/*.json
var bidTexts embed.FS

func init() { templates.RegisterTexts("the bid admission kind", bidTexts, "texts") }
