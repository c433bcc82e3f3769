package rewrite

// The Responses API shares its host, its key and its error envelope with
// Chat Completions, so an app is not told apart by the host it calls but
// by the path: Shapes (the shapes a host picks) leaves OpenAIResponses
// out, and AppShape picks it.

// ResponsesPath is the Responses endpoint, relative to OpenAI's API root.
const ResponsesPath = "/responses"

// AppShape is the shape an app speaks when it calls path (the full request
// path) of a route whose shape is route: OpenAIResponses for OpenAI's
// /v1/responses, else route.
func AppShape(route Shape, path string) Shape {
	if (route == OpenAI || route == OpenAIResponses) && path == OpenAI.APIRoot()+ResponsesPath {
		return OpenAIResponses
	}
	if route == OpenAIResponses {
		return OpenAI
	}
	return route
}

// Vendor is the vendor family of s: OpenAI for both OpenAI shapes, which
// take the same model names and the same key; s itself for the others.
func (s Shape) Vendor() Shape {
	if s == OpenAIResponses {
		return OpenAI
	}
	return s
}

// SameWire reports whether an upstream of shape up can be sent an app's
// request of shape app byte for byte: the same shape, or a Responses
// request to an OpenAI upstream, which serves the Responses API beside
// Chat Completions (api.openai.com, and the OpenAI-compatible servers that
// implement it). A Chat Completions request to a Responses-only upstream is
// translated.
func SameWire(app, up Shape) bool {
	return app == up || (app == OpenAIResponses && up == OpenAI)
}
