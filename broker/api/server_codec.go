package api

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/airlock-dev/airlock/broker"
	brokerv1 "github.com/airlock-dev/airlock/proto/airlock/broker/v1"
)

// boundedCodec is the proto codec, except that an IssueHandleRequest's
// lists are counted on the wire before it is decoded: 128 KiB of empty
// destinations would otherwise decode into some 65,000 objects, only to be
// refused by the checks Issue makes afterwards.
type boundedCodec struct{ encoding.CodecV2 }

func newBoundedCodec() boundedCodec { return boundedCodec{encoding.GetCodecV2(proto.Name)} }

// Unmarshal implements encoding.CodecV2.
func (c boundedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*brokerv1.IssueHandleRequest); ok {
		if err := checkIssueWire(data.Materialize()); err != nil {
			return err
		}
	}
	return c.CodecV2.Unmarshal(data, v)
}

// Field numbers of IssueHandleRequest and Destination that are lists.
const (
	issueDestinationsField  = 4
	issuePassIntentsField   = 8
	issueBudgetField        = 12
	issueResidencyField     = 13
	destinationMethodsField = 4
)

// checkIssueWire counts the destinations, pass intents, budget lines,
// residency regions and each destination's methods of an encoded IssueHandleRequest. Malformed input
// is left to the decoder to refuse.
func checkIssueWire(b []byte) error {
	var dests, intents, budget, residency int
	err := eachField(b, func(num protowire.Number, typ protowire.Type, val []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case issueDestinationsField:
			if dests++; dests > broker.MaxDestinations {
				return fmt.Errorf("%w: destinations: at most %d", broker.ErrBadRequest, broker.MaxDestinations)
			}
			methods := 0
			return eachField(val, func(num protowire.Number, typ protowire.Type, _ []byte) error {
				if num == destinationMethodsField && typ == protowire.BytesType {
					if methods++; methods > broker.MaxMethods {
						return fmt.Errorf("%w: destinations[%d]: at most %d methods", broker.ErrBadRequest, dests-1, broker.MaxMethods)
					}
				}
				return nil
			})
		case issuePassIntentsField:
			if intents++; intents > broker.MaxDestinations {
				return fmt.Errorf("%w: pass intents: at most %d", broker.ErrBadRequest, broker.MaxDestinations)
			}
		case issueBudgetField:
			if budget++; budget > broker.MaxBudgetLines {
				return fmt.Errorf("%w: budget: at most %d lines", broker.ErrBadRequest, broker.MaxBudgetLines)
			}
		case issueResidencyField:
			if residency++; residency > broker.MaxResidency {
				return fmt.Errorf("%w: residency: at most %d regions", broker.ErrBadRequest, broker.MaxResidency)
			}
		}
		return nil
	})
	return err
}

// eachField calls fn with each field of the message b, length-delimited
// values unwrapped; it stops at the first malformed field (nil error).
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		val := b[:m]
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return nil
			}
			val = v
		}
		if err := fn(num, typ, val); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}
