package tests

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/sigv4"
)

// servePage serves html at / on a free loopback port until the test ends
// and returns the page's origin.
func servePage(t *testing.T, html string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, html)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// uploadPage is a page that PUTs a text through a presigned URL, then
// GETs it back through another, and writes what happened into #out as
// JSON (or the error).
func uploadPage(putURL, getURL, text string) string {
	js, _ := json.Marshal(map[string]string{"put": putURL, "get": getURL, "text": text})
	return `<!doctype html><html><body><pre id="out">pending</pre><script>
const cfg = ` + string(js) + `;
(async () => {
  const out = document.getElementById('out');
  try {
    const put = await fetch(cfg.put, {method: 'PUT', body: cfg.text, headers: {'Content-Type': 'text/plain'}});
    const etag = put.headers.get('ETag');
    const get = await fetch(cfg.get);
    const body = await get.text();
    out.textContent = JSON.stringify({put: put.status, etag: etag, get: get.status, body: body, note: get.headers.get('x-amz-meta-note')});
  } catch (e) {
    out.textContent = 'error: ' + e;
  }
})();
</script></body></html>`
}

var outRE = regexp.MustCompile(`(?s)<pre id="out">(.*?)</pre>`)

// TestCORS configures CORS on a bucket and checks preflights, headers on
// actual responses (errors included) and a real browser uploading through
// a presigned URL from another origin and reading the object back; a page
// from an origin the rules do not name is stopped by the browser.
func TestCORS(t *testing.T) {
	parallel(t)
	b := browser{bin: chromiumBin(t), dir: t.TempDir()}
	d := startDev(t)
	c := sdkClient(d)
	bucket := aws.String("web")
	if _, err := c.CreateBucket(ctx(t), &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	preflight := func(origin, method, headers string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodOptions, d.info.Endpoint+"/web/upload.txt", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if method != "" {
			req.Header.Set("Access-Control-Request-Method", method)
		}
		if headers != "" {
			req.Header.Set("Access-Control-Request-Headers", headers)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	// Pages: one from an allowed origin, one from an origin not named.
	key := "upload.txt"
	text := "uploaded from the browser at " + time.Now().Format(time.RFC3339Nano)
	ps := s3.NewPresignClient(c)
	putReq, err := ps.PresignPutObject(ctx(t), &s3.PutObjectInput{Bucket: bucket, Key: aws.String(key), ContentType: aws.String("text/plain")}, s3.WithPresignExpires(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	getReq, err := ps.PresignGetObject(ctx(t), &s3.GetObjectInput{Bucket: bucket, Key: aws.String(key)}, s3.WithPresignExpires(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	good := servePage(t, uploadPage(putReq.URL, getReq.URL, text))
	evilPut, _ := ps.PresignPutObject(ctx(t), &s3.PutObjectInput{Bucket: bucket, Key: aws.String("evil.txt"), ContentType: aws.String("text/plain")})
	evil := servePage(t, uploadPage(evilPut.URL, getReq.URL, "should never arrive"))

	// No configuration yet: no preflight passes, and Get says so.
	if resp := preflight(good, "PUT", "content-type"); resp.StatusCode != 403 {
		t.Errorf("preflight without CORS rules: %d", resp.StatusCode)
	}
	if _, err := c.GetBucketCors(ctx(t), &s3.GetBucketCorsInput{Bucket: bucket}); apiCode(err) != "NoSuchCORSConfiguration" {
		t.Errorf("GetBucketCors before any: %v", err)
	}

	cors := &types.CORSConfiguration{CORSRules: []types.CORSRule{
		{ID: aws.String("app"), AllowedOrigins: []string{good}, AllowedMethods: []string{"GET", "PUT", "HEAD"},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag", "x-amz-meta-note"}, MaxAgeSeconds: aws.Int32(600)},
		{ID: aws.String("read-anywhere"), AllowedOrigins: []string{"http://*.example.com"}, AllowedMethods: []string{"GET"}},
	}}
	if _, err := c.PutBucketCors(ctx(t), &s3.PutBucketCorsInput{Bucket: bucket, CORSConfiguration: cors}); err != nil {
		t.Fatalf("PutBucketCors: %v", err)
	}
	got, err := c.GetBucketCors(ctx(t), &s3.GetBucketCorsInput{Bucket: bucket})
	if err != nil || len(got.CORSRules) != 2 || got.CORSRules[0].AllowedOrigins[0] != good || aws.ToInt32(got.CORSRules[0].MaxAgeSeconds) != 600 ||
		!slices.Equal(got.CORSRules[0].ExposeHeaders, []string{"ETag", "x-amz-meta-note"}) {
		t.Fatalf("GetBucketCors: %v %+v", err, got)
	}
	_, err = c.PutBucketCors(ctx(t), &s3.PutBucketCorsInput{Bucket: bucket, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PATCH"}}}}})
	if apiCode(err) != "InvalidRequest" {
		t.Errorf("a rule with method PATCH: %v; want InvalidRequest", err)
	}

	// Preflights, answered from the rules.
	resp := preflight(good, "PUT", "content-type,x-amz-meta-note")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != good || resp.Header.Get("Access-Control-Max-Age") != "600" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "PUT") ||
		resp.Header.Get("Access-Control-Allow-Headers") != "content-type, x-amz-meta-note" ||
		resp.Header.Get("Access-Control-Expose-Headers") != "ETag, x-amz-meta-note" || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Errorf("allowed preflight: %d %v", resp.StatusCode, resp.Header)
	}
	for _, r := range []struct{ origin, method string }{
		{evil, "PUT"}, {good, "DELETE"}, {"http://x.example.com", "PUT"}, {"http://example.com", "GET"},
	} {
		if resp := preflight(r.origin, r.method, ""); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight %s %s: %d %q; want 403 without CORS headers", r.origin, r.method, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if resp := preflight("http://x.example.com", "GET", ""); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "http://x.example.com" {
		t.Errorf("wildcard origin preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("", "PUT", ""); resp.StatusCode != 400 {
		t.Errorf("preflight without Origin: %d", resp.StatusCode)
	}

	// The browser uploads and reads back from the allowed origin.
	dom := b.dom(t, good+"/")
	m := outRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no result on the page:\n%s", dom)
	}
	t.Logf("the allowed page says: %s", m[1])
	var res struct {
		Put  int    `json:"put"`
		ETag string `json:"etag"`
		Get  int    `json:"get"`
		Body string `json:"body"`
	}
	if err := json.Unmarshal([]byte(m[1]), &res); err != nil {
		t.Fatalf("browser page says %q", m[1])
	}
	if res.Put != 200 || res.Get != 200 || res.Body != text || res.ETag == "" {
		t.Errorf("browser upload: %+v; want 200, an exposed ETag, and the text back", res)
	}
	if got := get(t, d.client(t), "web", key, minio.GetObjectOptions{}); string(got) != text {
		t.Errorf("object uploaded by the browser: %q", got)
	}
	// The other origin's page is stopped by the browser at the preflight.
	dom = b.dom(t, evil+"/")
	if m := outRE.FindStringSubmatch(dom); m == nil || !strings.HasPrefix(m[1], "error:") {
		t.Errorf("page from an origin the rules do not name: %q; want a fetch error", m)
	}
	if _, err := c.HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: bucket, Key: aws.String("evil.txt")}); err == nil {
		t.Error("the other origin's upload was stored")
	}

	// Actual responses carry the headers, errors included.
	for path, status := range map[string]int{"/web/" + key: 200, "/web/missing": 404} {
		req, _ := http.NewRequest(http.MethodGet, d.info.Endpoint+path, nil)
		req.Header.Set("Origin", good)
		resp := doSignedReq(t, d, req)
		if resp.StatusCode != status || resp.Header.Get("Access-Control-Allow-Origin") != good || resp.Header.Get("Access-Control-Expose-Headers") == "" ||
			!strings.Contains(resp.Header.Get("Vary"), "Origin") {
			t.Errorf("GET %s with Origin: %d %v", path, resp.StatusCode, resp.Header)
		}
		req, _ = http.NewRequest(http.MethodGet, d.info.Endpoint+path, nil)
		req.Header.Set("Origin", evil)
		if resp := doSignedReq(t, d, req); resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET %s from an origin not allowed got CORS headers", path)
		}
	}

	if _, err := c.DeleteBucketCors(ctx(t), &s3.DeleteBucketCorsInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	if resp := preflight(good, "PUT", ""); resp.StatusCode != 403 {
		t.Errorf("preflight after DeleteBucketCors: %d", resp.StatusCode)
	}
}

// doSignedReq signs req (no body) and sends it; the body is closed.
func doSignedReq(t *testing.T, d *devCluster, req *http.Request) *http.Response {
	t.Helper()
	signReq(req, d)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func signReq(req *http.Request, d *devCluster) {
	sigv4.Sign(req, d.info.AccessKey, d.info.SecretKey, "us-east-1", time.Now(), sha(nil))
}
