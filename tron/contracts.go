package tron

import (
	"bytes"
	"fmt"
	"math/big"
)

// TriggerSmartContract is protocol.TriggerSmartContract: a call of a TVM
// contract. A TRC-20 transfer is one with Data = transfer(to, amount).
type TriggerSmartContract struct {
	Owner          Address // field 1: the caller, who must sign
	Contract       Address // field 2: the TRC-20 contract
	CallValue      int64   // field 3: TRX (sun) sent along; 0 for a token transfer
	Data           []byte  // field 4: ABI call data
	CallTokenValue int64   // field 5
	TokenID        int64   // field 6
	Unknown        []UnknownField
}

// Marshal serialises the message in field-number order (proto3, zero values
// omitted), as java-tron does.
func (t TriggerSmartContract) Marshal() []byte {
	parts := []part{
		bytesPart(1, addrBytes(t.Owner)),
		bytesPart(2, addrBytes(t.Contract)),
		varintPart(3, t.CallValue),
		bytesPart(4, t.Data),
		varintPart(5, t.CallTokenValue),
		varintPart(6, t.TokenID),
	}
	return assemble(parts, t.Unknown)
}

func addrBytes(a Address) []byte {
	if a.IsZero() {
		return nil
	}
	return a[:]
}

// DecodeTriggerSmartContract decodes the Value of a TriggerSmartContract.
func DecodeTriggerSmartContract(b []byte) (TriggerSmartContract, error) {
	var t TriggerSmartContract
	pr := protoReader{msg: "TriggerSmartContract", buf: b}
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return TriggerSmartContract{}, err
		}
		switch f.num {
		case 1, 2:
			if err := pr.expect(f, wireBytes); err != nil {
				return TriggerSmartContract{}, err
			}
			a, err := AddressFromBytes(f.data)
			if err != nil {
				return TriggerSmartContract{}, pr.fail(f.off, "field %d: %v", f.num, err)
			}
			if f.num == 1 {
				t.Owner = a
			} else {
				t.Contract = a
			}
		case 3, 5, 6:
			if err := pr.expect(f, wireVarint); err != nil {
				return TriggerSmartContract{}, err
			}
			switch f.num {
			case 3:
				t.CallValue = int64Val(f)
			case 5:
				t.CallTokenValue = int64Val(f)
			default:
				t.TokenID = int64Val(f)
			}
		case 4:
			if err := pr.expect(f, wireBytes); err != nil {
				return TriggerSmartContract{}, err
			}
			t.Data = f.data
		default:
			t.Unknown = append(t.Unknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	return t, nil
}

// TransferContract is protocol.TransferContract: a plain TRX transfer. weir
// never builds one; it is decoded so `weir tx decode` can explain any
// transaction an operator pastes.
type TransferContract struct {
	Owner   Address // field 1
	To      Address // field 2
	Amount  int64   // field 3, sun
	Unknown []UnknownField
}

// DecodeTransferContract decodes the Value of a TransferContract.
func DecodeTransferContract(b []byte) (TransferContract, error) {
	var t TransferContract
	pr := protoReader{msg: "TransferContract", buf: b}
	for !pr.done() {
		f, err := pr.next()
		if err != nil {
			return TransferContract{}, err
		}
		switch f.num {
		case 1, 2:
			if err := pr.expect(f, wireBytes); err != nil {
				return TransferContract{}, err
			}
			a, err := AddressFromBytes(f.data)
			if err != nil {
				return TransferContract{}, pr.fail(f.off, "field %d: %v", f.num, err)
			}
			if f.num == 1 {
				t.Owner = a
			} else {
				t.To = a
			}
		case 3:
			if err := pr.expect(f, wireVarint); err != nil {
				return TransferContract{}, err
			}
			t.Amount = int64Val(f)
		default:
			t.Unknown = append(t.Unknown, UnknownField{Num: f.num, Raw: f.raw})
		}
	}
	return t, nil
}

// TransferSelector is the 4-byte ABI selector of transfer(address,uint256):
// the first bytes of keccak256("transfer(address,uint256)").
var TransferSelector = [4]byte{0xa9, 0x05, 0x9c, 0xbb}

// maxUint256 bounds a TRC-20 amount.
var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// EncodeTransferCall returns the ABI call data of transfer(to, amount):
// selector ‖ 32-byte address word (12 zero bytes ‖ the 20 account bytes,
// without the 0x41 prefix, as the TVM sees addresses) ‖ 32-byte amount.
func EncodeTransferCall(to Address, amount *big.Int) ([]byte, error) {
	if to.IsZero() || to[0] != AddressPrefix {
		return nil, fmt.Errorf("%w: recipient %x is not a TRON address", ErrInvalidTransfer, to[:])
	}
	if amount == nil || amount.Sign() <= 0 {
		return nil, fmt.Errorf("%w: amount must be positive", ErrInvalidTransfer)
	}
	if amount.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("%w: amount exceeds 256 bits", ErrInvalidTransfer)
	}
	data := make([]byte, 4+32+32)
	copy(data, TransferSelector[:])
	copy(data[4+12:4+32], to[1:])
	amount.FillBytes(data[4+32:])
	return data, nil
}

// DecodeTransferCall reads transfer(to, amount) call data. The address word's
// low 20 bytes are the account; its high 12 bytes are ignored, as the TVM
// masks them (some wallets put the 0x41 prefix there).
func DecodeTransferCall(data []byte) (to Address, amount *big.Int, err error) {
	if len(data) != 4+32+32 || !bytes.Equal(data[:4], TransferSelector[:]) {
		return Address{}, nil, fmt.Errorf("%w: call data is not transfer(address,uint256)", ErrNotTransfer)
	}
	to[0] = AddressPrefix
	copy(to[1:], data[4+12:4+32])
	return to, new(big.Int).SetBytes(data[4+32:]), nil
}

// TokenTransfer is what a TRC-20 transfer transaction moves.
type TokenTransfer struct {
	Owner    Address // sender, the signer
	Contract Address // token contract
	To       Address
	Amount   *big.Int // token base units (USDT: 6 decimals)
}

// TokenTransfer extracts the TRC-20 transfer when the transaction is exactly
// one TriggerSmartContract calling transfer(to, amount) with no TRX or TRC-10
// value attached; otherwise the error wraps ErrNotTransfer (or ErrMalformed
// when the contract bytes do not decode).
func (r RawData) TokenTransfer() (TokenTransfer, error) {
	if len(r.Contracts) != 1 {
		return TokenTransfer{}, fmt.Errorf("%w: %d contracts, want 1", ErrNotTransfer, len(r.Contracts))
	}
	c := r.Contracts[0]
	if c.Type != TriggerSmartContractType {
		return TokenTransfer{}, fmt.Errorf("%w: contract type is %v", ErrNotTransfer, c.Type)
	}
	t, err := DecodeTriggerSmartContract(c.Value)
	if err != nil {
		return TokenTransfer{}, err
	}
	if t.CallValue != 0 || t.CallTokenValue != 0 {
		return TokenTransfer{}, fmt.Errorf("%w: call carries TRX or TRC-10 value", ErrNotTransfer)
	}
	to, amount, err := DecodeTransferCall(t.Data)
	if err != nil {
		return TokenTransfer{}, err
	}
	return TokenTransfer{Owner: t.Owner, Contract: t.Contract, To: to, Amount: amount}, nil
}

// Owner returns the owner_address of the first contract (the account that
// must sign), for the contract types this package knows.
func (r RawData) Owner() (Address, error) {
	if len(r.Contracts) == 0 {
		return Address{}, fmt.Errorf("%w: no contract", ErrMalformed)
	}
	c := r.Contracts[0]
	switch c.Type {
	case TriggerSmartContractType:
		t, err := DecodeTriggerSmartContract(c.Value)
		return t.Owner, err
	case TransferContractType:
		t, err := DecodeTransferContract(c.Value)
		return t.Owner, err
	}
	return Address{}, fmt.Errorf("%w: owner of %v is not decoded", ErrNotTransfer, c.Type)
}
