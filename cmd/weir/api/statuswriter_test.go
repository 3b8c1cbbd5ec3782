package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

// StatusWriter (shared by the API and the console) reports the status the
// client got: the first one written, 200 for a bare body or nothing, and
// lets http.ResponseController flush through it.
func TestStatusWriterReportsWhatWasSent(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := &api.StatusWriter{ResponseWriter: rec}
	if sw.Wrote() || sw.Status() != http.StatusOK {
		t.Fatalf("nothing written: wrote %v, status %d", sw.Wrote(), sw.Status())
	}
	sw.WriteHeader(http.StatusTeapot)
	sw.WriteHeader(http.StatusInternalServerError) // superfluous: net/http keeps the first
	if !sw.Wrote() || sw.Status() != http.StatusTeapot || rec.Code != http.StatusTeapot {
		t.Fatalf("after 418 then 500: status %d, recorder %d", sw.Status(), rec.Code)
	}

	rec = httptest.NewRecorder()
	sw = &api.StatusWriter{ResponseWriter: rec}
	if _, err := sw.Write([]byte("body")); err != nil {
		t.Fatal(err)
	}
	if !sw.Wrote() || sw.Status() != http.StatusOK {
		t.Fatalf("a bare body: wrote %v, status %d", sw.Wrote(), sw.Status())
	}
	if err := http.NewResponseController(sw).Flush(); err != nil || !rec.Flushed {
		t.Fatalf("flush through the writer: %v (flushed %v)", err, rec.Flushed)
	}
}
