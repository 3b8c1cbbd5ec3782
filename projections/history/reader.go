package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrBadCursor: a cursor that names no entry of the walk asked for.
var ErrBadCursor = errors.New("history: not a cursor of this list")

// Reader walks the index newest first.
type Reader struct {
	stream jetstream.Stream
}

// NewReader reads stream (EnsureStream).
func NewReader(stream jetstream.Stream) *Reader { return &Reader{stream: stream} }

// Walk calls fn with entries newest first — account's only when account is
// not "" — starting strictly before the entry at sequence before (0: from
// the newest), until fn says stop or the index is exhausted. Each step is
// one get by sequence: the index is never read whole.
func (r *Reader) Walk(ctx context.Context, account string, before uint64, fn func(Entry) (stop bool, err error)) error {
	if account != "" {
		return r.walkAccount(ctx, account, before, fn)
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("history: %s info: %w", Stream, err)
	}
	seq := info.State.LastSeq
	if before != 0 {
		if before > seq+1 {
			return ErrBadCursor
		}
		seq = before - 1
	}
	for ; seq >= 1 && seq >= info.State.FirstSeq; seq-- {
		e, _, err := r.get(ctx, seq)
		if err != nil {
			return err
		}
		if stop, err := fn(e); err != nil || stop {
			return err
		}
	}
	return nil
}

func (r *Reader) walkAccount(ctx context.Context, account string, before uint64, fn func(Entry) (bool, error)) error {
	var seq uint64
	if before == 0 {
		m, err := r.stream.GetLastMsgForSubject(ctx, Subject(account))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("history: last entry of %s: %w", account, err)
		}
		seq = m.Sequence
	} else {
		e, prev, err := r.get(ctx, before)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return ErrBadCursor
		}
		if err != nil {
			return err
		}
		if e.Account != account {
			return ErrBadCursor
		}
		seq = prev
	}
	for seq != 0 {
		e, prev, err := r.get(ctx, seq)
		if err != nil {
			return err
		}
		if e.Account != account || prev >= seq {
			return fmt.Errorf("history: entry %d breaks %s's chain", seq, account)
		}
		if stop, err := fn(e); err != nil || stop {
			return err
		}
		seq = prev
	}
	return nil
}

// get reads the entry at seq and its account back-pointer.
func (r *Reader) get(ctx context.Context, seq uint64) (Entry, uint64, error) {
	m, err := r.stream.GetMsg(ctx, seq)
	if err != nil {
		return Entry{}, 0, fmt.Errorf("history: entry %d: %w", seq, err)
	}
	var e Entry
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return Entry{}, 0, fmt.Errorf("history: entry %d: %w", seq, err)
	}
	prev, err := strconv.ParseUint(m.Header.Get(HeaderPrevSeq), 10, 64)
	if err != nil {
		return Entry{}, 0, fmt.Errorf("history: entry %d has no %s: %w", seq, HeaderPrevSeq, err)
	}
	if m.Subject != Subject(e.Account) {
		return Entry{}, 0, fmt.Errorf("history: entry %d on %s names account %q", seq, m.Subject, e.Account)
	}
	e.Seq = seq
	return e, prev, nil
}
