package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReviewBytes bounds an AdmissionReview body. The API server sends the
// whole pod; etcd's own limit on an object is about 1.5 MiB.
const MaxReviewBytes = 4 << 20

// Handler answers AdmissionReview v1 requests at POST /inject.
type Handler struct {
	// Config is what is injected.
	Config Config
	// Log receives one line per review.
	Log zerolog.Logger
}

var podKind = metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}

// ServeHTTP decodes the review, decides, and answers with a review that
// carries the request's uid. Only malformed requests get an HTTP error; the
// API server then applies the webhook's failurePolicy (Ignore by default).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed: POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "unsupported content type: want application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err != nil {
		http.Error(w, "reading the AdmissionReview: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decoding the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" || review.Request == nil {
		http.Error(w, fmt.Sprintf("want an admission.k8s.io/v1 AdmissionReview with a request, got apiVersion %q kind %q",
			review.APIVersion, review.Kind), http.StatusBadRequest)
		return
	}

	req := review.Request
	resp, d, name, err := h.review(req)
	ev := h.Log.Info()
	switch {
	case err != nil:
		ev = h.Log.Warn().Str("decision", "refused").Str("error", err.Error())
	case len(d.Patch) > 0:
		ev = ev.Str("decision", "injected").Int("ops", len(d.Patch))
	default:
		ev = ev.Str("decision", "unchanged").Str("reason", d.Reason)
	}
	ev.Str("uid", string(req.UID)).Str("namespace", req.Namespace).Str("pod", name).
		Bool("dry_run", req.DryRun != nil && *req.DryRun).
		Float64("ms", float64(time.Since(start).Microseconds())/1000).Msg("admission review")

	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(w, "encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// review decides on one request. Requests that are not pod creations are
// allowed unchanged: the webhook configuration should not send them, and
// refusing them would block unrelated work.
func (h *Handler) review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, Decision, string, error) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind != podKind || req.SubResource != "" || req.Operation != admissionv1.Create {
		return resp, Decision{Reason: fmt.Sprintf("not a pod creation (%s %s)", req.Operation, req.Kind.Kind)}, req.Name, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		// Fail open, like failurePolicy Ignore: an undecodable pod is the API
		// server's to judge, not ours.
		return resp, Decision{Reason: "undecodable pod: " + err.Error()}, req.Name, nil
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	d, err := h.Config.Mutate(&pod)
	if err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusBadRequest,
			Reason:  metav1.StatusReasonBadRequest,
			Message: "detour injector: " + joinLines(err),
		}
		return resp, d, name, err
	}
	resp.Warnings = d.Warnings
	if len(d.Patch) > 0 {
		patch, err := json.Marshal(d.Patch)
		if err != nil {
			// Cannot happen with the types of Operation; fail open if it does.
			return resp, Decision{Reason: "encoding the patch: " + err.Error()}, name, nil
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch = patch
		resp.PatchType = &pt
	}
	return resp, d, name, nil
}

// joinLines turns an errors.Join error into one line.
func joinLines(err error) string {
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) {
		return err.Error()
	}
	s := ""
	for i, e := range j.Unwrap() {
		if i > 0 {
			s += "; "
		}
		s += e.Error()
	}
	return s
}
