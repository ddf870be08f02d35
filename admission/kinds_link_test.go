package admission_test

// The admission tests' routes include the kinds of their own packages, so their binary links them: a
// kind's package imports admission, which is why only an external test file can import it. The
// stock kind's reserve call is handed to the tests from here (stockview_test.go).
import (
	"context"

	"github.com/edgeq/edgeq/admission"
	_ "github.com/edgeq/edgeq/admission/bid"
	"github.com/edgeq/edgeq/admission/stock"
)

func init() {
	admission.ReserveTogether = func(ctx context.Context, svc *admission.Service, product string, cs []admission.Claim) (codes, remaining []int64, err error) {
		res, err := stock.Reserve(ctx, svc, product, cs)
		for _, r := range res {
			codes, remaining = append(codes, r.Code), append(remaining, r.Remaining)
		}
		return codes, remaining, err
	}
}
