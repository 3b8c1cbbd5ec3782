package sagas

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A node without the head-scan call fails every poll: the worker says so
// once at warn level, then at debug until the scan works again, and then
// says that once.
func TestABlockScanThatKeepsFailingIsLoggedWhenItStartsAndEndsFailing(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var h scanHealth
	down := errors.New("404 Not Found")
	for _, err := range []error{nil, down, down, down, nil, nil, down} {
		h.report(log, "head block scan", err)
	}
	var levels []string
	for line := range strings.Lines(buf.String()) {
		_, rest, _ := strings.Cut(line, "level=")
		level, _, _ := strings.Cut(rest, " ")
		levels = append(levels, level)
	}
	if got, want := strings.Join(levels, ","), "WARN,DEBUG,DEBUG,INFO,WARN"; got != want {
		t.Fatalf("levels %s, want %s:\n%s", got, want, buf.String())
	}
}
