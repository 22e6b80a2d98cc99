package shardrpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// budgetServer serves a handler behind a Verifier with a small body
// budget; the handler holds its request until hold is closed (or, for a
// request whose body is "quick", answers at once).
func budgetServer(t *testing.T, o VerifierOptions, hold chan struct{}) (*httptest.Server, *Verifier, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	v := NewVerifier("cluster-secret", o)
	ts := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served.Add(1)
		if !bytes.HasPrefix(b, []byte("quick")) {
			<-hold
		}
		w.Write([]byte("ok"))
	})))
	t.Cleanup(ts.Close)
	return ts, v, &served
}

// TestBodyBudgetRefusesThenRetries: signed bodies beyond the budget wait,
// then are refused with 503 and Retry-After before their handler runs;
// the Client sends them again and they pass once budget is free.
func TestBodyBudgetRefusesThenRetries(t *testing.T) {
	hold := make(chan struct{})
	ts, v, served := budgetServer(t, VerifierOptions{BodyBudget: 1000, BodyWait: 50 * time.Millisecond}, hold)
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	signed := &http.Client{Transport: NewAuthTransport("cluster-secret", nil)}
	post := func(body string) (*http.Response, error) {
		return signed.Post(ts.URL+"/v1/x", "application/json", strings.NewReader(body))
	}

	// A holds 800 of the 1000 bytes.
	aDone := make(chan error, 1)
	go func() {
		resp, err := post(strings.Repeat("a", 800))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = errors.New(resp.Status)
			}
		}
		aDone <- err
	}()
	waitFor(t, func() bool { return served.Load() == 1 })

	// B (800 more) waits BodyWait, then is refused unread and unserved.
	resp, err := post(strings.Repeat("b", 800))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get(HeaderCode) != CodeUnavailable || resp.Header.Get(HeaderRetryAfter) == "" {
		t.Fatalf("over budget: %d %s Retry-After %q, want 503 Unavailable with Retry-After", resp.StatusCode, resp.Header.Get(HeaderCode), resp.Header.Get(HeaderRetryAfter))
	}
	if served.Load() != 1 {
		t.Fatalf("handler ran %d times, want only A", served.Load())
	}
	// A small body still fits beside A.
	resp, err = post("quick")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("small body beside A: %v %v", resp, err)
	}
	resp.Body.Close()
	if st := v.BodyStats(); st.Refused != 1 || st.Waited != 1 {
		t.Fatalf("stats %+v, want one wait and one refusal", st)
	}

	// Through a Client, B is sent again until A's handler returns.
	c := New("cluster-secret", nil)
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(hold)
	}()
	body := "quick" + strings.Repeat("b", 795)
	r, err := c.do(context.Background(), ts.Listener.Addr().String(), "test", http.MethodPost, "/v1/x", nil, strings.NewReader(body))
	if err != nil {
		t.Fatalf("client retry: %v", err)
	}
	r.Body.Close()
	if err := <-aDone; err != nil {
		t.Fatalf("A: %v", err)
	}
	if st := v.BodyStats(); st.Refused < 2 {
		t.Fatalf("stats %+v: the client's first tries should have been refused", st)
	}
}

// TestBodyLargerThanBudgetRunsAlone: a body larger than the whole budget
// is not refused for ever; it takes the whole budget.
func TestBodyLargerThanBudgetRunsAlone(t *testing.T) {
	ts, _, served := budgetServer(t, VerifierOptions{BodyBudget: 100, BodyWait: 50 * time.Millisecond}, nil)
	signed := &http.Client{Transport: NewAuthTransport("cluster-secret", nil)}
	resp, err := signed.Post(ts.URL+"/v1/x", "application/json", strings.NewReader("quick"+strings.Repeat("x", 5000)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || served.Load() != 1 {
		t.Fatalf("large body: %d, served %d", resp.StatusCode, served.Load())
	}
}

// TestClientGivesUpOnBusy: a server that stays busy is retried busyTries
// times, then its 503 is the error; a request whose body cannot be read
// again is not retried.
func TestClientGivesUpOnBusy(t *testing.T) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set(HeaderRetryAfter, "1")
		WriteError(w, http.StatusServiceUnavailable, CodeUnavailable, "busy")
	}))
	defer ts.Close()
	c := New("cluster-secret", nil)
	addr := ts.Listener.Addr().String()
	_, err := c.do(context.Background(), addr, "test", http.MethodPost, "/v1/x", nil, strings.NewReader("body"))
	var re *RemoteError
	if !errors.As(err, &re) || re.Status != 503 || calls.Load() != busyTries {
		t.Fatalf("err %v after %d calls, want a 503 after %d", err, calls.Load(), busyTries)
	}
	calls.Store(0)
	_, err = c.do(context.Background(), addr, "test", http.MethodPut, "/v1/x", nil, io.MultiReader(strings.NewReader("stream")))
	if err == nil || calls.Load() != 1 {
		t.Fatalf("stream body: err %v after %d calls, want one refused call", err, calls.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
