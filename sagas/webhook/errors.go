package webhook

import (
	"fmt"

	"github.com/weir-payouts/weir/aggregate"
)

// CodeInvalidURL: a webhook URL that is not http(s), carries credentials,
// or targets a loopback/private/link-local address while those are not
// allowed (422).
const CodeInvalidURL = "invalid_url"

func invalidURL(format string, args ...any) error {
	return &aggregate.Error{Code: CodeInvalidURL, Field: "url", Message: fmt.Sprintf(format, args...)}
}
