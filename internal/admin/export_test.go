package admin

// RepresentativeMetrics is representativeMetrics for the external tests
// (package admin_test), which have promtool.
var RepresentativeMetrics = representativeMetrics
