package telemetry

import (
	"encoding/binary"
	"fmt"
)

// partialSuccess is an ExportTraceServiceResponse's partial_success: the
// collector took the request but refused rejected of its spans (OTLP
// specification, "Partial Success"), or accepted everything and has a
// warning in message.
type partialSuccess struct {
	rejected int64
	message  string
}

// rejectedError is the export error of a batch the collector took only in
// part. countingExporter counts its rejected spans as dropped; the call
// itself did not fail, and sending the batch again would not help.
type rejectedError struct {
	partialSuccess
	spans int // in the batch
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("collector refused %d of %d spans: %.200s", e.rejected, e.spans, e.message)
}

// decodeExportResponse reads an ExportTraceServiceResponse. Fields it does
// not know are skipped, as protobuf's rules require.
func decodeExportResponse(b []byte) (partialSuccess, error) {
	var p partialSuccess
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return p, err
		}
		b = rest
		if f.num != responsePartialSuccess || f.wire != wireBytes {
			continue
		}
		// A message field given twice is merged: later fields win.
		for m := f.bytes; len(m) > 0; {
			g, rest, err := nextField(m)
			if err != nil {
				return p, err
			}
			m = rest
			switch {
			case g.num == partialRejectedSpans && g.wire == wireVarint:
				p.rejected = int64(g.value)
			case g.num == partialErrorMessage && g.wire == wireBytes:
				p.message = string(g.bytes)
			}
		}
	}
	return p, nil
}

// The fields of google.rpc.Status (googleapis, google/rpc/status.proto),
// the body of an OTLP/HTTP error answer when it is protobuf.
const (
	rpcStatusCode    = 1
	rpcStatusMessage = 2
)

// decodeRPCStatus reads a google.rpc.Status's code and message.
func decodeRPCStatus(b []byte) (code int32, message string, err error) {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return 0, "", err
		}
		b = rest
		switch {
		case f.num == rpcStatusCode && f.wire == wireVarint:
			code = int32(f.value)
		case f.num == rpcStatusMessage && f.wire == wireBytes:
			message = string(f.bytes)
		}
	}
	return code, message, nil
}

// grpcMessage returns the first message of a gRPC answer body: a 1-byte
// compressed flag, a 4-byte big-endian length, the message. ok is false
// for a body without a whole uncompressed message (detour asks for no
// compression, so a compressed one is not read).
func grpcMessage(body []byte) (msg []byte, ok bool) {
	if len(body) < 5 || body[0] != 0 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(n) > uint64(len(body)-5) {
		return nil, false
	}
	return body[5 : 5+n], true
}
