package stock

import (
	"embed"
	"net/http"

	"github.com/edgeq/edgeq/internal/vocab"
	"github.com/edgeq/edgeq/internal/web"
	"github.com/edgeq/edgeq/templates"
)

// The stock kind's codes (docs/reference.md "Stock admission", "Errors") and their texts in every
// language (texts/<tag>.json: a page's "msg.CODE" and "head.CODE").
var (
	errInsufficientStock  = web.NewError(vocab.NewCode(http.StatusConflict, "INSUFFICIENT_STOCK"), "Sorry, this item is sold out.")
	errProductNotFound    = web.NewError(vocab.NewCode(http.StatusNotFound, "PRODUCT_NOT_FOUND"), "There is no such product.")
	errPurchaseInProgress = web.NewError(vocab.NewCode(http.StatusConflict, "PURCHASE_IN_PROGRESS"), "Another purchase of yours is being processed. Please wait for it to finish.")
	errAlreadyPurchased   = web.NewError(vocab.NewCode(http.StatusConflict, "ALREADY_PURCHASED"), "You have already bought as many of this item as one person may.")

	// The stock admin views'.
	errProductExists     = web.NewError(vocab.NewCode(http.StatusConflict, "PRODUCT_EXISTS"), "A product with this id exists.")
	errAdmissionNotFound = web.NewError(vocab.NewCode(http.StatusNotFound, "ADMISSION_NOT_FOUND"), "There is no such admission.")
	errAlreadyGivenBack  = web.NewError(vocab.NewCode(http.StatusConflict, "ALREADY_GIVEN_BACK"), "This admission's units were given back already: it was released or cancelled.")
)

//go:embed texts/*.json
var stockTexts embed.FS

func init() { templates.RegisterTexts("the stock admission kind", stockTexts, "texts") }
