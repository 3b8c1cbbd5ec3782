package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// Cookie names. Both are HttpOnly, SameSite=Strict and scoped to
// /console/.
const (
	// SessionCookie holds the session id (random, 256 bits).
	SessionCookie = "weir_console"
	// LoginCookie holds the login form's double-submitted CSRF token.
	LoginCookie = "weir_console_login"
	// CSRFField is the hidden form field every POST carries.
	CSRFField = "csrf"
	// Path is where the console lives and its cookies are sent.
	Path = "/console/"
)

// Defaults of Config.
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultSessionMax  = 12 * time.Hour
	// MaxSessions bounds the sessions kept in memory; a login beyond it
	// (after dropping expired ones) is refused.
	MaxSessions = 10000
)

var errTooManySessions = errors.New("console: too many sessions")

// session is one logged-in browser. The principal is kept without its
// token.
type session struct {
	key     string // sha256 of the id: the map key, never the id itself
	p       api.Principal
	csrf    string
	created time.Time
	seen    time.Time
	flashes []flash
}

// flash is a one-shot message shown on the next page (the answer to a
// POST, which redirects).
type flash struct {
	Kind string // "ok" or "error"
	Text string
	Code string // the API's error code, when a refusal
}

// sessions are kept in memory: a restart logs everyone out.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{idle: idle, max: max, now: now, byID: map[string]*session{}}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b)
}

func sessionKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// create starts a session for p and returns its id (the cookie value).
func (s *sessions) create(p api.Principal) (string, *session, error) {
	p.Token, p.TokenSHA256 = "", ""
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= MaxSessions {
		for k, ss := range s.byID {
			if s.expired(ss, now) {
				delete(s.byID, k)
			}
		}
		if len(s.byID) >= MaxSessions {
			return "", nil, errTooManySessions
		}
	}
	id := randomToken()
	ss := &session{key: sessionKey(id), p: p, csrf: randomToken(), created: now, seen: now}
	s.byID[ss.key] = ss
	return id, ss, nil
}

func (s *sessions) expired(ss *session, now time.Time) bool {
	return now.Sub(ss.seen) >= s.idle || now.Sub(ss.created) >= s.max
}

// get returns the live session of id and marks it seen; an expired one is
// dropped (expired reports that it existed).
func (s *sessions) get(id string) (ss *session, expired bool) {
	if id == "" {
		return nil, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sessionKey(id)
	ss, ok := s.byID[k]
	if !ok {
		return nil, false
	}
	if s.expired(ss, now) {
		delete(s.byID, k)
		return nil, true
	}
	ss.seen = now
	return ss, false
}

// alive reports whether the session still exists and has not expired,
// without marking it seen (a live stream is not activity).
func (s *sessions) alive(ss *session) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.byID[ss.key]
	return ok && cur == ss && !s.expired(ss, now)
}

func (s *sessions) delete(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, ss.key)
}

func (s *sessions) addFlash(ss *session, f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ss.flashes) < 8 {
		ss.flashes = append(ss.flashes, f)
	}
}

func (s *sessions) takeFlashes(ss *session) []flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := ss.flashes
	ss.flashes = nil
	return f
}

// sameToken compares two CSRF tokens in constant time; empty never
// matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
