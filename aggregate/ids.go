package aggregate

import (
	"time"

	"github.com/google/uuid"
)

// ParseOperationID validates a client-minted operation id and returns its
// canonical form (lowercase, hyphenated). The canonical form is the
// withdrawal's stream id, so two spellings of one UUID ("{…}", "urn:uuid:…",
// upper case) land on the same stream instead of creating two withdrawals.
// The nil UUID is refused: it is what a client that forgot to mint one sends.
func ParseOperationID(s string) (string, error) {
	if s == "" {
		return "", newError(CodeInvalidOperationID, "operation_id", "required")
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", newError(CodeInvalidOperationID, "operation_id", "not a UUID")
	}
	if id == uuid.Nil {
		return "", newError(CodeInvalidOperationID, "operation_id", "the nil UUID is not an operation id")
	}
	return id.String(), nil
}

const maxAccountIDLen = 64

// ValidateAccountID checks an account id: 1–64 characters from [A-Za-z0-9_-],
// starting with a letter or digit. The id becomes a subject token of the
// account's stream, so '.', '*', '>' and spaces — which NATS reads as
// structure — are refused rather than escaped.
func ValidateAccountID(s string) error {
	if s == "" {
		return newError(CodeInvalidAccount, "account", "required")
	}
	if len(s) > maxAccountIDLen {
		return newError(CodeInvalidAccount, "account", "longer than %d characters", maxAccountIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return newError(CodeInvalidAccount, "account", "must start with a letter or digit")
		}
		if !alnum && c != '_' && c != '-' {
			return newError(CodeInvalidAccount, "account", "only letters, digits, '_' and '-' are allowed")
		}
	}
	return nil
}

const maxTokenLen = 128

// checkToken validates free-form identifiers that are not subject tokens
// (principal names, worker ids, credit ids, reasons): 1–128 printable ASCII
// characters without spaces, so they cannot smuggle control characters into
// logs or look alike in two encodings.
func checkToken(code, field, s string) error {
	if s == "" {
		return newError(code, field, "required")
	}
	if len(s) > maxTokenLen {
		return newError(code, field, "longer than %d characters", maxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return newError(code, field, "only printable ASCII without spaces is allowed")
		}
	}
	return nil
}

// checkAt refuses a missing time and returns it in UTC without a monotonic
// reading, so that what is decided is exactly what is stored and reloaded.
func checkAt(at time.Time) (time.Time, error) {
	if at.IsZero() {
		return time.Time{}, newError(CodeInvalidCommand, "at", "required")
	}
	return at.UTC(), nil
}
