package tron

import "fmt"

// A hand-written subset of the protobuf wire format: enough to write the
// fields of a TRC-20 transfer in java-tron's field order and to read any
// well-formed message, keeping fields we do not model as raw bytes so they
// are never silently lost. Writing protobuf by hand keeps the bytes we hash
// under our control (no library re-ordering or re-encoding them).

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
	// Wire types 3 and 4 (deprecated groups) are refused: java-tron's
	// messages have none, and skipping them safely needs nesting rules.
)

// maxFieldNumber is protobuf's largest legal field number (2^29 - 1).
const maxFieldNumber = 1<<29 - 1

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendTag(b []byte, field, wire int) []byte {
	return appendVarint(b, uint64(field)<<3|uint64(wire))
}

// appendVarintField writes an int64/int32/enum field. Zero values are
// omitted, as proto3 serialisers (and so java-tron) do.
func appendVarintField(b []byte, field int, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendVarint(appendTag(b, field, wireVarint), uint64(v))
}

// appendBytesField writes a bytes/string/message field; empty values are
// omitted (proto3 default).
func appendBytesField(b []byte, field int, data []byte) []byte {
	if len(data) == 0 {
		return b
	}
	b = appendTag(b, field, wireBytes)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}

// protoField is one decoded field. For wireBytes, data is the payload; for
// the numeric wire types, num is the value. raw is the whole field (tag
// included) exactly as it appeared, for preserving unknown fields.
type protoField struct {
	num  int
	wire int
	val  uint64
	data []byte
	raw  []byte
	off  int // offset of the tag within the message
}

// protoReader walks the fields of one message. It never panics: every
// length is checked against the remaining input.
type protoReader struct {
	msg string // message name, for errors
	buf []byte
	off int
}

func (r *protoReader) fail(off int, format string, args ...any) error {
	return &DecodeError{Message: r.msg, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func (r *protoReader) done() bool { return r.off >= len(r.buf) }

func (r *protoReader) varint() (uint64, error) {
	var v uint64
	start := r.off
	for shift := uint(0); ; shift += 7 {
		if r.off >= len(r.buf) {
			return 0, r.fail(start, "truncated varint")
		}
		if shift >= 64 {
			return 0, r.fail(start, "varint longer than 10 bytes")
		}
		c := r.buf[r.off]
		r.off++
		if shift == 63 && c > 1 {
			return 0, r.fail(start, "varint overflows 64 bits")
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
}

func (r *protoReader) next() (protoField, error) {
	start := r.off
	tag, err := r.varint()
	if err != nil {
		return protoField{}, err
	}
	f := protoField{wire: int(tag & 7), off: start}
	if tag>>3 == 0 || tag>>3 > maxFieldNumber {
		return f, r.fail(start, "invalid field number %d", tag>>3)
	}
	f.num = int(tag >> 3)
	switch f.wire {
	case wireVarint:
		if f.val, err = r.varint(); err != nil {
			return f, err
		}
	case wireFixed64, wireFixed32:
		n := 8
		if f.wire == wireFixed32 {
			n = 4
		}
		if len(r.buf)-r.off < n {
			return f, r.fail(start, "field %d: truncated fixed%d", f.num, n*8)
		}
		for i := n - 1; i >= 0; i-- {
			f.val = f.val<<8 | uint64(r.buf[r.off+i])
		}
		r.off += n
	case wireBytes:
		n, err := r.varint()
		if err != nil {
			return f, err
		}
		if n > uint64(len(r.buf)-r.off) {
			return f, r.fail(start, "field %d: length %d exceeds the %d bytes left", f.num, n, len(r.buf)-r.off)
		}
		f.data = r.buf[r.off : r.off+int(n)]
		r.off += int(n)
	default:
		return f, r.fail(start, "field %d: unsupported wire type %d", f.num, f.wire)
	}
	f.raw = r.buf[start:r.off]
	return f, nil
}

// expect checks a known field carries the wire type its schema says; a
// mismatch means the bytes are not the message we think they are.
func (r *protoReader) expect(f protoField, wire int) error {
	if f.wire != wire {
		return r.fail(f.off, "field %d has wire type %d, want %d", f.num, f.wire, wire)
	}
	return nil
}

// int64Val reads a varint field as protobuf int64 (two's complement).
func int64Val(f protoField) int64 { return int64(f.val) }

// int32Val reads a varint field as protobuf int32/enum: protobuf truncates to
// the low 32 bits.
func int32Val(f protoField) int32 { return int32(uint32(f.val)) }
