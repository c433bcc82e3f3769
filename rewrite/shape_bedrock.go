package rewrite

// Bedrock is Amazon Bedrock's Converse API (bedrock-runtime): a shape an
// upstream can speak but no app does, since Bedrock's SDKs sign their calls
// and detour cannot intercept a signed request and re-sign it for another
// vendor. It is not in Shapes and not Valid (those are the app shapes); an
// upstream of this shape is always reached by translation. Its stream is
// AWS's binary event stream, which detour turns into SSE events (the event
// type as the SSE event name, the JSON payload as data) before the chain
// reads it, so every stream rule below sees SSE.
const Bedrock Shape = "bedrock"
