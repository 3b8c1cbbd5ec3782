package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/weir-payouts/weir/cmd/weir/api"
)

func init() {
	register(command{name: "principals", summary: "manage the principals file: add a principal with a new random token", run: runPrincipals})
}

func runPrincipals(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprintln(stderr, "Usage: weir principals add NAME --roles r1,r2 [--accounts a,b] [--file F]")
		return errUsage
	}
	fs := clientFlagSet("principals add", "principals add NAME --roles r1,r2 [--accounts a,b] [--file F]",
		"Adds a principal to the principals file (creating it, mode 0600) with a new random token.\n"+
			"The token is printed once, here, and the file keeps only its SHA-256 (token_sha256):\n"+
			"store it where the principal can read it; it cannot be shown again.", stderr)
	file := fs.String("file", "principals.json", "the principals file (serve's --principals)")
	roles := fs.String("roles", "", "comma-separated roles: requester, approver, operator, auditor")
	accounts := fs.String("accounts", "", `comma-separated accounts (names or globs like "ops-*") the principal is limited to; empty: all`)
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1); err != nil {
		return err
	}
	var list []api.Principal
	b, err := os.ReadFile(*file)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := checkPrivateFile("--file", *file); err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&list); err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	token := "weir_" + base64.RawURLEncoding.EncodeToString(raw[:])
	p := api.Principal{Name: pos[0], TokenSHA256: api.HashToken(token)}
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			p.Roles = append(p.Roles, api.Role(r))
		}
	}
	for _, a := range strings.Split(*accounts, ",") {
		if a = strings.TrimSpace(a); a != "" {
			p.Accounts = append(p.Accounts, a)
		}
	}
	list = append(list, p)
	if _, err := api.NewPrincipals(list); err != nil { // the file as serve will read it
		return err
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivateFile(*file, append(out, '\n')); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", token)
	fmt.Fprintf(stderr, "added %q (roles %s) to %s; the token above is shown only now\n", p.Name, *roles, *file)
	return nil
}

// writePrivateFile replaces path with data, mode 0600, atomically (a
// crash leaves the old file or the new one, never half of one).
func writePrivateFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".principals-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
