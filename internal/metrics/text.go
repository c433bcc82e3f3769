package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ContentType is the Prometheus text format's, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteText writes the scrape in the Prometheus text format 0.0.4, as the
// Prometheus client library does: families sorted by name, each with its
// HELP and TYPE lines, series sorted by their label values (labels in name
// order), a histogram's buckets then _sum and _count. A family with no
// series is left out.
func (s *Scrape) WriteText(w io.Writer) error {
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriter(w)
	}
	fams := slices.Clone(s.fams)
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.desc.name, b.desc.name) })
	var num []byte
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		d := f.desc
		order := d.order
		slices.SortStableFunc(f.samples, func(a, b sample) int {
			for _, i := range order {
				if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
					return c
				}
			}
			return 0
		})
		bw.WriteString("# HELP ")
		bw.WriteString(d.name)
		bw.WriteByte(' ')
		helpEscaper.WriteString(bw, d.help)
		bw.WriteString("\n# TYPE ")
		bw.WriteString(d.name)
		bw.WriteByte(' ')
		bw.WriteString(d.kind.String())
		bw.WriteByte('\n')
		for _, sm := range f.samples {
			switch {
			case sm.dist == nil:
				num = writeSample(bw, num, d, "", sm.values, "", 0, sm.value)
			case d.kind == KindHistogram:
				for i, c := range sm.dist.counts {
					le := math.Inf(1)
					if i < len(sm.dist.bounds) {
						le = sm.dist.bounds[i]
					}
					num = writeSample(bw, num, d, "_bucket", sm.values, "le", le, c)
				}
				num = writeSample(bw, num, d, "_sum", sm.values, "", 0, sm.dist.sum)
				num = writeSample(bw, num, d, "_count", sm.values, "", 0, sm.dist.count)
			default:
				for i, q := range sm.dist.bounds {
					num = writeSample(bw, num, d, "", sm.values, "quantile", q, sm.dist.counts[i])
				}
				num = writeSample(bw, num, d, "_sum", sm.values, "", 0, sm.dist.sum)
				num = writeSample(bw, num, d, "_count", sm.values, "", 0, sm.dist.count)
			}
		}
	}
	return bw.Flush()
}

// The text format escapes a backslash and a line feed in HELP text, and
// also a double quote in a label value.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func writeSample(w *bufio.Writer, num []byte, d *Desc, suffix string, values []string, extra string, extraValue, value float64) []byte {
	w.WriteString(d.name)
	w.WriteString(suffix)
	sep := byte('{')
	for _, i := range d.order {
		w.WriteByte(sep)
		w.WriteString(d.labels[i])
		w.WriteString(`="`)
		valueEscaper.WriteString(w, values[i])
		w.WriteByte('"')
		sep = ','
	}
	if extra != "" {
		w.WriteByte(sep)
		w.WriteString(extra)
		w.WriteString(`="`)
		num = appendFloat(num[:0], extraValue)
		w.Write(num)
		w.WriteByte('"')
		sep = ','
	}
	if sep == ',' {
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	num = appendFloat(num[:0], value)
	w.Write(num)
	w.WriteByte('\n')
	return num
}

// appendFloat formats f as the text format writes numbers: Go's shortest
// 'g' form, with +Inf, -Inf and NaN spelled out and -0 written as 0.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 0:
		return append(b, '0')
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// Handler serves r's families in the text format, gzipped when the request
// accepts gzip, as the Prometheus client's handler does. Prometheus asks for
// the text format among others, so it needs no other encoding.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s := r.Gather()
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Add("Vary", "Accept-Encoding")
		bw := bufPool.Get().(*bufio.Writer)
		defer func() {
			// Pooled without the response they wrote to.
			bw.Reset(nil)
			bufPool.Put(bw)
		}()
		if acceptsGzip(req.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			gz := gzipPool.Get().(*gzip.Writer)
			defer func() {
				gz.Reset(nil)
				gzipPool.Put(gz)
			}()
			gz.Reset(w)
			bw.Reset(gz)
			if s.WriteText(bw) == nil {
				gz.Close()
			}
			return
		}
		bw.Reset(w)
		s.WriteText(bw)
	})
}

var (
	bufPool  = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
	gzipPool = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
)

// acceptsGzip reports whether Accept-Encoding lists gzip (or *) with a
// weight above zero and does not refuse gzip by name.
func acceptsGzip(headers []string) bool {
	star := false
	for _, h := range headers {
		for _, part := range strings.Split(h, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			if coding == "gzip" {
				return q > 0
			}
			star = q > 0
		}
	}
	return star
}
