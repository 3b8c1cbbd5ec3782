package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// tlsFiles writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
func tlsFiles(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return ca, srvCert, srvKey, cliCert, cliKey
}

// TestServeAndClientsSpeakMutualTLSToAnExternalNATS: with --nats-tls-ca,
// --nats-tls-cert and --nats-tls-key, weir serve and a client command
// reach a NATS server that demands a client certificate; without them
// they do not.
func TestServeAndClientsSpeakMutualTLSToAnExternalNATS(t *testing.T) {
	ca, srvCert, srvKey, cliCert, cliKey := tlsFiles(t, t.TempDir())
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvCert, KeyFile: srvKey, CaFile: ca, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		TLS: true, TLSVerify: true, TLSConfig: tc, TLSTimeout: 2,
		Username: "weir", Password: "tls-test-password",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("TLS nats-server not ready")
	}
	url := "tls://127.0.0.1:" + itoa(uint64(srv.Addr().(*net.TCPAddr).Port))
	creds := natsCreds{user: "weir", password: "tls-test-password", tlsCA: ca, tlsCert: cliCert, tlsKey: cliKey}
	cfg := serveConfig{
		Data: t.TempDir(), HTTP: "127.0.0.1:0", NATSURL: url, Sync: "lazy", Workers: 1, memory: true,
		SimBlockInterval: time.Hour, SimSolidityLag: 1, DailyLimit: "0", LogLevel: "warn", NATSCreds: creds, StartupWait: time.Second,
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := startEngine(context.Background(), cfg, log, io.Discard)
	if err != nil {
		t.Fatalf("serve over mutual TLS: %v", err)
	}
	t.Cleanup(func() { _ = eng.Close(context.Background()) })

	tlsArgs := []string{"--nats-url", url, "--nats-user", "weir", "--nats-password", "tls-test-password", "--token", "dev-olivia-token"}
	code, out, errOut := runWeir(t, append([]string{"balance", "dev", "--nats-tls-ca", ca, "--nats-tls-cert", cliCert, "--nats-tls-key", cliKey}, tlsArgs...)...)
	wantCode(t, code, 0, out, errOut)
	wantContains(t, "balance over TLS", out, "available")

	// Without a client certificate the server refuses the handshake.
	code, out, errOut = runWeir(t, append([]string{"balance", "dev", "--nats-tls-ca", ca}, tlsArgs...)...)
	if code == 0 {
		t.Fatalf("connected without a client certificate: %s", out)
	}
	noCert := cfg
	noCert.NATSCreds.tlsCert, noCert.NATSCreds.tlsKey = "", ""
	noCert.Data, noCert.HTTP = t.TempDir(), "127.0.0.1:0"
	if eng2, err := startEngine(context.Background(), noCert, log, io.Discard); err == nil {
		_ = eng2.Close(context.Background())
		t.Fatal("serve connected without a client certificate")
	}
}
