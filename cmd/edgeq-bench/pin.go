package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// pinRedis gives the redis-server process pid the CPU cpu alone and this process (edgeq, the origin
// and the load) every other CPU, as a deployment gives Redis a core of its own: edgeq's cost per
// request is then measured apart from Redis's. It returns the CPUs this process keeps. CPUs are
// numbered 0 to runtime.NumCPU()-1, so start the benchmark without a narrower affinity of its own.
func pinRedis(pid, cpu int) (string, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return "", errors.New("-redis-cpu needs taskset (Debian: util-linux)")
	}
	n := runtime.NumCPU()
	if n < 2 || cpu < 0 || cpu >= n {
		return "", fmt.Errorf("-redis-cpu %d: this process may use CPUs 0 to %d, and needs one left for itself", cpu, n-1)
	}
	var rest []string
	for c := range n {
		if c != cpu {
			rest = append(rest, strconv.Itoa(c))
		}
	}
	keep := strings.Join(rest, ",")
	for _, pin := range []struct{ cpus, pid string }{{strconv.Itoa(cpu), strconv.Itoa(pid)}, {keep, strconv.Itoa(os.Getpid())}} {
		// -a: every thread of the process; threads started later inherit their creator's set.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", pin.cpus, pin.pid).CombinedOutput(); err != nil {
			return "", fmt.Errorf("taskset -a -p -c %s %s: %v: %s", pin.cpus, pin.pid, err, strings.TrimSpace(string(out)))
		}
	}
	runtime.GOMAXPROCS(len(rest))
	return keep, nil
}

// pinnedWhere pins redis-server as pinRedis does unless cpu is -1, and says where everything runs:
// format given cpu and the CPUs this process keeps, or unpinned when nothing was pinned.
func pinnedWhere(pid, cpu int, unpinned, format string) (string, error) {
	if cpu < 0 {
		return unpinned, nil
	}
	keep, err := pinRedis(pid, cpu)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(format, cpu, keep), nil
}
