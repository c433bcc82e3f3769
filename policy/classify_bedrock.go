package policy

// bedrockRules classify Amazon Bedrock's exceptions by name: the
// x-amzn-ErrorType of an error answer or the :exception-type of a
// ConverseStream exception, which rewrite.ParseError reads as the type
// (docs/vendors.md#amazon-bedrock-upstream). The names are AWS's own and
// no other vendor sends them, so these rules go first: a
// ServiceQuotaExceededException is a 400 and a ModelNotReadyException a
// 429, which the general rules would call a bad request and a rate limit.
var bedrockRules = []rule{
	{ClassQuotaExhausted, "", func(f *facts) bool { return f.is("servicequotaexceededexception") }},
	// "Input is too long for requested model." is a ValidationException.
	{ClassContextTooLong, "context too long", func(f *facts) bool {
		return f.is("validationexception") && (f.says("input is too long", "too many input tokens") || f.says(contextPhrases...))
	}},
	// A model being loaded (imported and on-demand custom models): another
	// upstream can answer now.
	{ClassOverloaded, "", func(f *facts) bool {
		return f.is("modelnotreadyexception", "serviceunavailableexception")
	}},
	{ClassRateLimited, "", func(f *facts) bool { return f.is("throttlingexception") }},
	{ClassTimeout, "", func(f *facts) bool { return f.is("modeltimeoutexception") }},
	// ModelErrorException (424) and the stream's modelStreamErrorException
	// are the model failing, not the request.
	{ClassServerError, "", func(f *facts) bool {
		return f.is("modelerrorexception", "modelstreamerrorexception", "internalserverexception", "internalfailure")
	}},
	{ClassAuth, "", func(f *facts) bool {
		return f.is("accessdeniedexception", "unrecognizedclientexception", "expiredtokenexception",
			"invalidsignatureexception", "incompletesignatureexception", "missingauthenticationtokenexception")
	}},
	{ClassInvalidRequest, "", func(f *facts) bool {
		return f.is("validationexception", "resourcenotfoundexception")
	}},
}

func init() {
	// Prepended here rather than written into the table in classify.go,
	// so the whole of Bedrock's vocabulary reads in one place.
	rules = append(bedrockRules[:len(bedrockRules):len(bedrockRules)], rules...)
}
