package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// devStartAttempts bounds how often `regen dev` restarts a shard server that
// died while the cluster was coming up.
const devStartAttempts = 5

// devSupervisor starts the shard-server children of `regen dev`.
//
// The ports of a child are picked free just before it starts, and on a busy
// machine (CI running several dev clusters at once) another process can take
// one in between. A child that exits while the cluster is still coming up is
// therefore restarted on fresh ports, a few times. Once every server has
// joined (started was called), nothing is restarted: an operator or a test
// that kills a shard server means it.
type devSupervisor struct {
	ctx    context.Context
	self   string
	stdout io.Writer
	env    []string

	mu       sync.Mutex
	ready    bool // the cluster is up: no more restarts
	stopping bool // dev is shutting down: exits are expected
	procs    []*devChild
	wg       sync.WaitGroup
}

type devChild struct {
	info   DevProcess
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	killed bool          // by kill: expected, not reported
}

// start launches one child; it keeps supervising it in the background.
func (s *devSupervisor) start(info DevProcess, args []string) error {
	c := &devChild{info: info}
	if err := s.launch(c, args); err != nil {
		return err
	}
	s.mu.Lock()
	s.procs = append(s.procs, c)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.watch(c, args)
	return nil
}

// launch starts c on fresh ports.
func (s *devSupervisor) launch(c *devChild, args []string) error {
	httpAddr, err1 := freePort()
	gossipAddr, err2 := freePort()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("no free loopback port")
	}
	logf, err := os.OpenFile(filepath.Join(c.info.Data, "shard.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.self, append(args, "--listen", httpAddr, "--gossip", gossipAddr)...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Children die with the dev process, however it ends.
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.info.PID, c.info.Addr, c.info.Gossip = cmd.Process.Pid, httpAddr, gossipAddr
	s.mu.Unlock()
	return nil
}

// watch waits for c to exit and restarts it if the cluster is not up yet.
func (s *devSupervisor) watch(c *devChild, args []string) {
	defer s.wg.Done()
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		cmd, exited := c.cmd, c.exited
		s.mu.Unlock()
		<-exited
		s.mu.Lock()
		ready, stopping := s.ready, s.stopping || c.killed
		s.mu.Unlock()
		if stopping || s.ctx.Err() != nil {
			return
		}
		fmt.Fprintf(s.stdout, "shard server %s (pid %d) exited: %v\n", c.info.ID, cmd.Process.Pid, cmd.ProcessState)
		if ready || attempt >= devStartAttempts {
			return
		}
		time.Sleep(200 * time.Millisecond)
		if err := s.launch(c, args); err != nil {
			fmt.Fprintf(s.stdout, "shard server %s: restart failed: %v\n", c.info.ID, err)
			return
		}
		fmt.Fprintf(s.stdout, "shard server %s restarted on %s (attempt %d)\n", c.info.ID, c.info.Addr, attempt+1)
	}
}

// started marks the cluster as up and returns what runs now.
func (s *devSupervisor) started() []DevProcess {
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return s.current()
}

// current returns the children as they run now (a restart changes a
// child's PID and addresses).
func (s *devSupervisor) current() []DevProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DevProcess, len(s.procs))
	for i, c := range s.procs {
		out[i] = c.info
	}
	return out
}

// kill SIGKILLs child i on purpose (a benchmark's failure) and waits
// until it is gone; it is not restarted and its exit is not reported.
func (s *devSupervisor) kill(i int) {
	s.mu.Lock()
	s.ready = true
	c := s.procs[i]
	c.killed = true
	cmd, exited := c.cmd, c.exited
	s.mu.Unlock()
	cmd.Process.Kill()
	<-exited
}

// stopAll asks every child to stop and kills those that do not in time.
func (s *devSupervisor) stopAll() {
	s.mu.Lock()
	s.ready, s.stopping = true, true
	procs := append([]*devChild(nil), s.procs...)
	s.mu.Unlock()
	for _, c := range procs {
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, c := range procs {
			c.cmd.Process.Kill()
		}
		<-done
	}
}
