package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A principals file read one way by its reviewer and another by weir: a
// key given twice ("roles" twice: the last would win) or a key differing
// only in case ("Roles" beside "roles") is refused at start.
func TestPrincipalsFileWithDuplicateOrCaseVariantKeysIsRefused(t *testing.T) {
	for _, c := range []struct{ doc, key string }{
		{`[{"name":"erin","token":"erin-plain-token","roles":["auditor"],"roles":["operator"]}]`, `"roles" appears twice`},
		{`[{"name":"erin","token":"erin-plain-token","roles":["auditor"],"Roles":["operator"]}]`, `"Roles" is not "roles"`},
	} {
		path := filepath.Join(t.TempDir(), "principals.json")
		if err := os.WriteFile(path, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPrincipals(path); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Fatalf("%s: err %v, want %s", c.doc, err, c.key)
		}
	}
	path := filepath.Join(t.TempDir(), "principals.json")
	if err := os.WriteFile(path, []byte(`[{"name":"erin","token":"erin-plain-token","roles":["auditor"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrincipals(path); err != nil {
		t.Fatalf("a plain file: %v", err)
	}
}
