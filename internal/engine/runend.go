package engine

import (
	"errors"
	"os"
	"os/signal"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sirupsen/logrus"
	"go.k6.io/k6/v2/errext"
	"go.k6.io/k6/v2/js/common"
	"go.k6.io/k6/v2/lib"
	"go.k6.io/k6/v2/metrics"

	"github.com/xk6-regime/xk6-regime/internal/results"
)

// k6 global event numbers (internal/event) besides TestEnd; checked by name.
const (
	eventTestStart = 2
	eventExit      = 6
)

// exitResultsNotSaved is the exit status of a run whose saveResults({required:
// true}) failed, when k6 would otherwise exit 0 (k6's own codes end at 110).
const exitResultsNotSaved = 111

// runEnd finds out how the test run ended, for summary.json. k6 gives
// handleSummary no such fact (data.state holds only the TTY flags and the
// duration), so it is pieced together from what an extension can see:
//
//   - the signals the process receives while the test runs (k6 stops on
//     SIGINT and SIGTERM; a second listener does not change that);
//   - k6's execution state, taken from a VU's context: "interrupted" when the
//     run was stopped before its end, for any reason;
//   - the thresholds with abortOnFail that had failed (the metrics registry);
//   - at k6's Exit event, after handleSummary, the error the run ended with:
//     its abort reason and exit status are exact, and the folders saved in
//     this process get them (summary.json and report.html are replaced
//     atomically).
//
// A runEnd is safe for concurrent use.
type runEnd struct {
	exec atomic.Pointer[lib.ExecutionState]
	// summaryOff: k6 runs no handleSummary (--summary-mode=disabled), so no
	// saveResults() runs
	summaryOff atomic.Bool

	mu       sync.Mutex
	registry *metrics.Registry
	logger   logrus.FieldLogger
	sigCh    chan os.Signal
	signal   string // the first stop signal received while the test ran
	saved    []savedRun
	// failed is the error of a saveResults({required: true}) that failed.
	failed error
	// hooked: subscribed to k6's Exit event; atExit are the functions run
	// at it, after the folders are updated (outputs that finish there, after
	// handleSummary); final is how the run ended, decided there (set: Exit
	// has passed).
	hooked bool
	atExit []func()
	final  *results.RunEnd

	// notify and stop are signal.Notify and signal.Stop (tests replace them);
	// exit is os.Exit.
	notify func(chan<- os.Signal, ...os.Signal)
	stop   func(chan<- os.Signal)
	exit   func(int)
}

// savedRun is a results folder written by this process.
type savedRun struct {
	dir    string
	run    *results.Run
	report bool
}

func newRunEnd() *runEnd {
	return &runEnd{logger: logrus.StandardLogger(), notify: signal.Notify, stop: signal.Stop, exit: os.Exit}
}

// install subscribes to k6's TestStart and Exit events (once per process,
// from the first init context).
func (e *runEnd) install(registry *metrics.Registry, logger logrus.FieldLogger, events common.Events) {
	e.mu.Lock()
	e.registry = registry
	if logger != nil {
		e.logger = logger
	}
	e.mu.Unlock()
	if events.Global == nil {
		return
	}
	e.mu.Lock()
	e.hooked = true
	e.mu.Unlock()
	_, ch := events.Global.Subscribe(eventTestStart, eventExit)
	go func() {
		for ev := range ch {
			switch name := ev.Type.String(); name {
			case "TestStart":
				e.testStart()
			case "Exit":
				e.onExit(exitError(ev.Data))
			default:
				e.logger.Errorf("regime: unexpected k6 event %q (number %d); this k6 version is not supported, "+
					"summary.json may not say how the run ended", name, ev.Type)
			}
			ev.Done()
		}
	}()
}

// exitError reads the Error field of k6's Exit event data (an
// *event.ExitData, in a package an extension cannot import).
func exitError(data any) error {
	v := reflect.ValueOf(data)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName("Error")
	if !f.IsValid() || f.Kind() != reflect.Interface || f.IsNil() {
		return nil
	}
	err, _ := f.Interface().(error)
	return err
}

// testStart starts listening for the signals k6 stops on.
func (e *runEnd) testStart() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sigCh != nil {
		return
	}
	e.sigCh = make(chan os.Signal, 2)
	e.notify(e.sigCh, os.Interrupt, syscall.SIGINT, syscall.SIGTERM)
}

// noteSignals records a stop signal that arrived; callers hold e.mu.
func (e *runEnd) noteSignals() {
	if e.sigCh == nil {
		return
	}
	for {
		select {
		case s := <-e.sigCh:
			if e.signal == "" {
				e.signal = signalName(s)
			}
		default:
			return
		}
	}
}

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// noteExecution keeps k6's execution state from a VU's context (once).
func (e *runEnd) noteExecution(es *lib.ExecutionState) {
	if es != nil && e.exec.Load() == nil {
		e.exec.CompareAndSwap(nil, es)
	}
}

// addExitHook runs f at k6's Exit event, after handleSummary and the
// folders' update; false (f not taken) when the process is not subscribed
// to it (no script imported k6/x/regime) or Exit has passed.
func (e *runEnd) addExitHook(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.hooked || e.final != nil {
		return false
	}
	e.atExit = append(e.atExit, f)
	return true
}

// decided says whether k6's Exit event has decided how the run ended.
func (e *runEnd) decided() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.final != nil
}

// current says how the run ended as far as is known in handleSummary (at
// and after k6's Exit: as decided there).
func (e *runEnd) current() *results.RunEnd {
	e.mu.Lock()
	if e.final != nil {
		end := *e.final
		e.mu.Unlock()
		return &end
	}
	e.noteSignals()
	sig := e.signal
	e.mu.Unlock()
	f := endFacts{signal: sig, thresholds: e.abortingThresholds()}
	if es := e.exec.Load(); es != nil {
		f.haveExec, f.execStatus = true, es.GetCurrentExecutionStatus()
	}
	return decideEnd(f)
}

// cutShort says whether the test was stopped before its end (a signal, or
// k6's execution interrupted: abortOnFail, test.abort(), an error), from
// the signals and the execution status only: at k6's TestEnd the metrics
// engine may still be evaluating thresholds, so their state is not read
// (current reads it, after the test).
func (e *runEnd) cutShort() bool {
	e.mu.Lock()
	e.noteSignals()
	sig := e.signal
	e.mu.Unlock()
	if sig != "" {
		return true
	}
	es := e.exec.Load()
	return es != nil && es.GetCurrentExecutionStatus() == lib.ExecutionStatusInterrupted
}

// abortingThresholds lists the thresholds with abortOnFail whose last
// evaluation failed ("metric: expression"), sorted.
func (e *runEnd) abortingThresholds() []string {
	e.mu.Lock()
	registry := e.registry
	e.mu.Unlock()
	if registry == nil {
		return nil
	}
	var out []string
	add := func(m *metrics.Metric) {
		for _, th := range m.Thresholds.Thresholds {
			if th != nil && th.AbortOnFail && th.LastFailed {
				out = append(out, m.Name+": "+th.Source)
			}
		}
	}
	for _, m := range registry.All() {
		add(m)
		for _, sub := range m.Submetrics {
			if sub != nil && sub.Metric != nil {
				add(sub.Metric)
			}
		}
	}
	sort.Strings(out)
	return out
}

// endFacts are what decideEnd judges from.
type endFacts struct {
	signal     string
	haveExec   bool
	execStatus lib.ExecutionStatus
	thresholds []string // failed abortOnFail thresholds
	// haveExit is set at k6's Exit event; exitErr is the run's error then.
	haveExit bool
	exitErr  error
}

// decideEnd says how the run ended.
func decideEnd(f endFacts) *results.RunEnd {
	if f.haveExit {
		return exitEnd(f)
	}
	switch {
	case f.signal != "":
		return &results.RunEnd{Status: results.EndInterrupted, Signal: f.signal}
	case f.haveExec && f.execStatus == lib.ExecutionStatusInterrupted && len(f.thresholds) > 0:
		return &results.RunEnd{Status: results.EndAbortedByThreshold, Thresholds: f.thresholds}
	case f.haveExec && f.execStatus == lib.ExecutionStatusInterrupted:
		return &results.RunEnd{Status: results.EndAborted,
			Detail: "stopped before its end; k6 gives the reason when it exits"}
	}
	return &results.RunEnd{Status: results.EndCompleted}
}

// exitEnd says how the run ended from the error k6 exits with.
func exitEnd(f endFacts) *results.RunEnd {
	code := 0
	if f.exitErr != nil {
		code = 255 // k6's status for an error without a code
		var ec errext.HasExitCode
		if errors.As(f.exitErr, &ec) {
			code = int(ec.ExitCode())
		}
	}
	end := &results.RunEnd{Status: results.EndCompleted, ExitCode: &code}
	if f.exitErr == nil {
		return end
	}
	end.Detail = f.exitErr.Error()
	var ar errext.HasAbortReason
	if !errors.As(f.exitErr, &ar) {
		if f.haveExec && f.execStatus == lib.ExecutionStatusInterrupted {
			end.Status = results.EndAborted
		}
		return end
	}
	switch ar.AbortReason() {
	case errext.AbortedByUser:
		end.Status, end.Signal = results.EndInterrupted, f.signal
		if end.Signal == "" {
			end.Signal = signalInMessage(end.Detail)
		}
	case errext.AbortedByThreshold:
		end.Status, end.Thresholds = results.EndAbortedByThreshold, f.thresholds
	case errext.AbortedByThresholdsAfterTestEnd:
		// the run completed; its thresholds failed at the end
	case errext.AbortedByScriptError, errext.AbortedByScriptAbort:
		end.Status = results.EndAbortedByScript
	case errext.AbortedByTimeout:
		end.Status = results.EndTimedOut
	case errext.AbortedByOutput:
		end.Status = results.EndAbortedByOutput
	default:
		end.Status = results.EndAborted
	}
	return end
}

// signalInMessage finds the signal in k6's "received a 'interrupt' signal".
func signalInMessage(msg string) string {
	switch {
	case strings.Contains(msg, "'interrupt' signal"):
		return "SIGINT"
	case strings.Contains(msg, "'terminated' signal"):
		return "SIGTERM"
	}
	return ""
}

// saved records a folder written by saveResults.
func (e *runEnd) noteSaved(dir string, run *results.Run, report bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.saved = append(e.saved, savedRun{dir: dir, run: run, report: report})
}

// noteFailed records a failed saveResults({required: true}).
func (e *runEnd) noteFailed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed == nil {
		e.failed = err
	}
}

// onExit runs at k6's Exit event, after handleSummary: it stops listening
// for signals, writes the exact end into the folders saved in this process,
// and makes k6 exit with status 111 when a required saveResults failed and
// k6 would have exited 0.
func (e *runEnd) onExit(runErr error) {
	e.mu.Lock()
	e.noteSignals()
	if e.sigCh != nil {
		e.stop(e.sigCh)
	}
	f := endFacts{signal: e.signal, haveExit: true, exitErr: runErr}
	saved := append([]savedRun(nil), e.saved...)
	failed := e.failed
	e.mu.Unlock()
	f.thresholds = e.abortingThresholds()
	if es := e.exec.Load(); es != nil {
		f.haveExec, f.execStatus = true, es.GetCurrentExecutionStatus()
	}
	end := decideEnd(f)
	e.mu.Lock()
	final := *end
	e.final = &final
	hooks := e.atExit
	e.atExit = nil
	e.mu.Unlock()
	for _, s := range saved {
		fin := *end
		if prev := s.run.Summary.End; prev != nil && prev.Status == results.EndAborted && fin.Status == results.EndCompleted {
			// the script marked the run aborted (saveResults({aborted: true})): its judgement stays
			fin.Status, fin.Detail = prev.Status, strings.TrimSuffix(prev.Detail+"; k6: "+fin.Detail, "; k6: ")
		}
		s.run.Summary.End = &fin
		s.run.Summary.Aborted = fin.Status != results.EndCompleted
		if err := s.run.UpdateSummary(s.dir, s.report); err != nil {
			e.logger.WithError(err).Errorf("regime: could not record how the run ended in %s", s.dir)
		}
	}
	if len(saved) == 0 && failed == nil && e.summaryOff.Load() {
		e.logger.Warn("regime: k6 ran no handleSummary (--summary-mode=disabled): a regime.saveResults() or " +
			"regime.textSummary() there did not run, and no results folder was written")
	}
	for _, h := range hooks {
		h()
	}
	if failed != nil && runErr == nil {
		e.logger.WithError(failed).Errorf("regime: the results were not saved (saveResults({required: true})); "+
			"exiting with status %d", exitResultsNotSaved)
		e.exit(exitResultsNotSaved)
	}
}
