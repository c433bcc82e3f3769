// Package bedrock is Amazon Bedrock's Converse API as an upstream shape: it
// encodes a vendor-neutral request (rewrite/ir) as a Converse request, and
// decodes a Converse answer and a ConverseStream's events back into IR.
// Bedrock is never an app's shape (its SDKs sign every call), so the
// package has no request decoder and no answer encoder.
//
// ConverseStream is AWS's binary event stream; internal/cloud decodes its
// framing with the AWS SDK's decoder and hands this package one SSE event
// per message: the :event-type header as the event name (messageStart,
// contentBlockDelta, …) and the JSON payload as data. An exception message
// becomes an event named by its :exception-type whose data is the payload
// with "__type" added, which rewrite.ParseError reads like any error.
//
// Field names and meanings: docs/vendors.md#amazon-bedrock-upstream.
//
// bedrock imports rewrite, rewrite/ir and rewrite/sse, and no other vendor
// package.
package bedrock
