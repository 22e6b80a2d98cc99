package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A child that dies while the cluster comes up (say, its port was taken) is
// restarted on fresh ports; once the cluster is up, a dead child stays dead.
func TestDevSupervisorRestartsChildrenOnlyWhileStarting(t *testing.T) {
	dir := t.TempDir()
	// The fake shard server fails on its first run and sleeps afterwards.
	script := filepath.Join(dir, "fake-shard")
	marker := filepath.Join(dir, "ran-once")
	body := "#!/bin/sh\nif [ ! -e " + marker + " ]; then touch " + marker + "; exit 3; fi\nexec sleep 30\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := &syncWriter{w: &strings.Builder{}}
	sup := &devSupervisor{ctx: context.Background(), self: script, stdout: out}
	if err := sup.start(DevProcess{ID: "s1", Data: dir}, nil); err != nil {
		t.Fatal(err)
	}
	first := sup.procs[0].info.PID
	var running []DevProcess
	for deadline := time.Now().Add(10 * time.Second); ; {
		sup.mu.Lock()
		pid := sup.procs[0].info.PID
		sup.mu.Unlock()
		if pid != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child was not restarted; output:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	running = sup.started()
	if running[0].PID == first || running[0].Addr == "" {
		t.Fatalf("started() = %+v, want the restarted child", running[0])
	}
	// After started(), a killed child is not brought back.
	proc, _ := os.FindProcess(running[0].PID)
	proc.Kill()
	time.Sleep(500 * time.Millisecond)
	sup.mu.Lock()
	pid := sup.procs[0].info.PID
	sup.mu.Unlock()
	if pid != running[0].PID {
		t.Fatalf("child restarted after the cluster was up (pid %d -> %d)", running[0].PID, pid)
	}
	sup.stopAll()
	if !strings.Contains(out.String(), "restarted on") {
		t.Fatalf("no restart message in output:\n%s", out.String())
	}
}

// syncWriter serialises writes from the supervisor's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(fmt.Stringer).String()
}
