package main

import (
	"errors"
	"flag"

	"github.com/nats-io/nats.go"
)

// natsCreds are the flags naming how weir (serve) or a client command
// authenticates to NATS and secures the connection. On weir's embedded
// server a principal's token is enough (see clientOpts); an external
// cluster has its own users, keys and certificates.
type natsCreds struct {
	creds, user, password, nkey string
	tlsCA, tlsCert, tlsKey      string
}

func addNATSCredFlags(fs *flag.FlagSet) *natsCreds {
	c := &natsCreds{}
	c.register(fs)
	return c
}

func (c *natsCreds) register(fs *flag.FlagSet) {
	fs.StringVar(&c.creds, "nats-creds", "", "NATS credentials file (user JWT + nkey seed) for an external server")
	fs.StringVar(&c.user, "nats-user", "", "NATS user name (with --nats-password)")
	fs.StringVar(&c.password, "nats-password", "", "NATS password (prefer the env var WEIR_NATS_PASSWORD: flags show in ps)")
	fs.StringVar(&c.nkey, "nats-nkey", "", "file holding the NATS user's nkey seed")
	fs.StringVar(&c.tlsCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server with")
	fs.StringVar(&c.tlsCert, "nats-tls-cert", "", "client certificate file for NATS mutual TLS (with --nats-tls-key)")
	fs.StringVar(&c.tlsKey, "nats-tls-key", "", "client key file for NATS mutual TLS")
}

// identity reports whether the flags name a NATS identity of their own
// (then a client's --token is sent only inside each command).
func (c *natsCreds) identity() bool {
	return c.creds != "" || c.user != "" || c.nkey != ""
}

// options turns the flags into connect options. token, when no other
// identity is given, authenticates the connection itself (weir's embedded
// server admits a principal by its token).
func (c *natsCreds) options(token string) ([]nats.Option, error) {
	var opts []nats.Option
	n := 0
	if c.creds != "" {
		n++
		opts = append(opts, nats.UserCredentials(c.creds))
	}
	if c.user != "" || c.password != "" {
		if c.user == "" || c.password == "" {
			return nil, errors.New("--nats-user and --nats-password go together")
		}
		n++
		opts = append(opts, nats.UserInfo(c.user, c.password))
	}
	if c.nkey != "" {
		n++
		o, err := nats.NkeyOptionFromSeed(c.nkey)
		if err != nil {
			return nil, errors.New("--nats-nkey: cannot read the seed file") // its error may quote the seed
		}
		opts = append(opts, o)
	}
	if n > 1 {
		return nil, errors.New("give one of --nats-creds, --nats-user/--nats-password, --nats-nkey")
	}
	if n == 0 && token != "" {
		opts = append(opts, nats.Token(token))
	}
	if c.tlsCA != "" {
		opts = append(opts, nats.RootCAs(c.tlsCA))
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if c.tlsCert != "" {
		opts = append(opts, nats.ClientCert(c.tlsCert, c.tlsKey))
	}
	return opts, nil
}
