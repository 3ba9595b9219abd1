// Command harness runs one scenario with the official Pulsar Go client and prints one JSON line of observations.
//
// Usage: harness <serviceUrl> <scenario> [args...]. The process records what happened and never asserts: exit code
// 0 means the scenario ran (pytest judges the observations); 1 means an unexpected failure, printed as
// {"error": ..., "observations": ...}; 2 means a usage error. Client log lines go to stderr, so that stdout carries
// only the JSON line.
package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
)

// deadline bounds a whole scenario, so that a server that never answers cannot hang the harness.
const deadline = 60 * time.Second

func main() {
	if len(os.Args) < 3 {
		finish(2, map[string]any{"error": usage("usage: harness <serviceUrl> <scenario> [args...]")})
	}
	url, name, args := os.Args[1], os.Args[2], os.Args[3:]
	fn, known := scenarios[name]
	if !known {
		finish(2, map[string]any{"error": usage("unknown scenario " + name)})
	}
	obs := newObservations()
	obs.put("scenario", name)
	go func() {
		time.Sleep(deadline)
		finish(1, map[string]any{
			"error":        map[string]any{"type": "HarnessTimeout", "message": fmt.Sprintf("not done after %s", deadline)},
			"observations": obs.snapshot(),
		})
	}()
	options := pulsar.ClientOptions{
		URL:               url,
		OperationTimeout:  10 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		// HARNESS_TRANSACTIONS=false: a broker without transaction coordinators (the conformance command sets it),
		// where a client with transactions enabled cannot be built.
		EnableTransaction: os.Getenv("HARNESS_TRANSACTIONS") != "false",
		Logger: pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr,
			&slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	err := secureClient(&options)
	var client pulsar.Client
	if err == nil {
		client, err = pulsar.NewClient(options)
	}
	if err != nil {
		finish(1, map[string]any{"error": describe(err), "observations": obs.snapshot()})
	}
	r := &run{client: client, obs: obs}
	err = runScenario(fn, r, args)
	r.closeAll()
	client.Close()
	if err != nil {
		finish(1, map[string]any{"error": describe(err), "observations": obs.snapshot()})
	}
	finish(0, obs.snapshot())
}

// runScenario runs fn; a panic of the scenario's own code (a missing argument) becomes its error.
func runScenario(fn scenario, r *run, args []string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("scenario panicked: %v", p)
		}
	}()
	return fn(r, args)
}

func usage(message string) map[string]any {
	names := make([]string, 0, len(scenarios))
	for name := range scenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	return map[string]any{"type": "Usage", "message": message + "; scenarios: " + strings.Join(names, ", ")}
}

// finishing makes the first finish the only one (the deadline's goroutine and main may race).
var finishing sync.Mutex

// finish prints the result as one JSON line and exits with code.
func finish(code int, result map[string]any) {
	finishing.Lock()
	line, err := json.Marshal(result)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(line))
	os.Exit(code)
}
