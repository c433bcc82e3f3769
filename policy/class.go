package policy

// Class is the failure class of one upstream attempt (docs/architecture.md#failure-classes). The
// empty class means the attempt succeeded.
type Class string

// The built-in failure classes. errors.rules in policy.json may assign any of
// them to a response the built-in table would classify differently.
const (
	ClassNone           Class = ""
	ClassRateLimited    Class = "rate_limited"
	ClassQuotaExhausted Class = "quota_exhausted"
	ClassOverloaded     Class = "overloaded"
	ClassServerError    Class = "server_error"
	ClassTimeout        Class = "timeout"
	// ClassUnreachable is a transport failure before any HTTP response:
	// connection refused or reset, DNS failure, upstream TLS verification
	// failure. Not among the classes detour started with; added so that an operator can
	// tell "the vendor said 5xx" from "we never reached the vendor".
	ClassUnreachable    Class = "unreachable"
	ClassContextTooLong Class = "context_too_long"
	ClassInvalidRequest Class = "invalid_request"
	ClassAuth           Class = "auth"
	ClassContentFilter  Class = "content_filter"
	ClassBadResponse    Class = "bad_response"
)

// ClassLocalLimit is an attempt that was never sent, because detour's own
// limit for the upstream (upstreams.NAME.limits: rpm or concurrency) was
// reached; the chain skips to the next upstream. It is detour's decision,
// not the upstream's answer, so it is kept out of Classes: errors.rules
// cannot assign it and errors.classes cannot change its action, and it
// never counts against the upstream's breaker.
const ClassLocalLimit Class = "local_limit"

// Classes lists every failure class in documentation order.
var Classes = []Class{
	ClassRateLimited, ClassQuotaExhausted, ClassOverloaded, ClassServerError,
	ClassTimeout, ClassUnreachable, ClassContextTooLong, ClassInvalidRequest,
	ClassAuth, ClassContentFilter, ClassBadResponse,
}

// Valid reports whether c is a failure class a policy may name: one of
// Classes (ClassNone and ClassLocalLimit are not).
func (c Class) Valid() bool {
	for _, k := range Classes {
		if k == c {
			return true
		}
	}
	return false
}

// ClassBudgetExhausted is an attempt that was never sent, because a spend
// budget (budgets[]) covering the upstream or the route is spent for the
// current day or month. Like ClassLocalLimit it is detour's own decision:
// a skip, kept out of Classes so that no rule can assign it and no
// errors.classes entry can change it, never counted against the breaker
// and never a cooldown (the budget's own period end is when it lifts).
const ClassBudgetExhausted Class = "budget_exhausted"
