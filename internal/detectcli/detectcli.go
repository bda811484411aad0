// Package detectcli implements the `detect` command: it runs the steady-state
// detector offline over CSV files and prints one JSON object per series.
package detectcli

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.k6.io/k6/v2/errext"
	"go.k6.io/k6/v2/errext/exitcodes"

	"github.com/xk6-regime/xk6-regime/detector"
	"github.com/xk6-regime/xk6-regime/internal/observation"
)

// options are the command's own flags besides the detector config.
type options struct {
	column      string
	group       string
	timeCol     string
	timeUnit    string
	preset      string
	tagsPath    string
	noHindsight bool
	// maxGroups caps the series held at once per file (--group); rows of
	// groups beyond it are counted, not analysed (see overflow).
	maxGroups int
	cfg       detector.Config
	tags      *tagWriter
	stderr    io.Writer     // warnings
	sem       chan struct{} // one slot per CPU for the refinements
	progress  string        // --progress: auto, always or never
}

// NewCommand returns the `detect` cobra command writing results to stdout
// and per-file errors to stderr. When any file or series fails, RunE returns
// an error after every file has been processed (exit status 1); bad flags,
// option values or arguments are usage errors (exit status 2).
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &options{cfg: detector.DefaultConfig(), stderr: stderr}
	cmd := &cobra.Command{
		Use:   "detect [flags] FILE.csv[.gz]...",
		Short: "Find cold end, warm-up and steady state in CSV series",
		Long: `Runs the steady-state detector over numeric columns of CSV files (gzip is
detected by the .gz suffix or the gzip magic bytes). One series is one file, or
one value of the --group column within a file, in file order; lines starting
with # are comments (a results folder's series/iterations-*.csv reads with
--column median_ms --time end_ms --time-unit ms: its last column is the
online tag). Prints one JSON object per series; observation indexes are 0-based within
the series. --tags writes every observation's online tag, into a temporary
file put in place only when every input was read whole (an input with an
error leaves --tags as it was).`,
		Args:          usageArgs(cobra.MinimumNArgs(1)),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			show, err := o.prepare(cmd.Flags(), stderr, args)
			if err != nil {
				return err
			}
			return o.run(args, stdout, stderr, show)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.column, "column", "", "numeric column to analyse (default: the last column)")
	fs.StringVar(&o.group, "group", "", "column whose values split a file into series (e.g. fork)")
	fs.StringVar(&o.timeCol, "time", "", "timestamp column (default: observation index as time)")
	fs.StringVar(&o.timeUnit, "time-unit", "s", "unit of the --time column: ns, us, ms or s")
	fs.StringVar(&o.preset, "preset", "benchmark",
		"defaults to start from: benchmark (microbenchmark series, e.g. JMH) or service (load-test latency, the k6 extension's default)")
	fs.StringVar(&o.tagsPath, "tags", "",
		"write every observation's online tag to this CSV file (file,group,index,time,value,regime): the regime in force when it arrived")
	fs.BoolVar(&o.noHindsight, "no-hindsight", false,
		"skip the end-of-run refinement (its object is null); it costs about 0.3 s for a series of 3,000 observations (longer series are refined on a trace of at most 4,096 entries)")
	fs.StringVar(&o.progress, "progress", "auto",
		"progress on stderr after each file (files done, elapsed, estimated time left): auto (when stderr is a terminal), always or never")
	fs.IntVar(&o.maxGroups, "max-groups", DefaultMaxGroups,
		"most --group series held per file; rows of further groups are counted in one \"other\" line, not analysed "+
			"(each series costs about 240 KiB allocated with the default detector options)")
	addConfigFlags(fs, &o.cfg)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	return cmd
}

// prepare applies the preset, checks the options (usage errors), opens
// the --tags file, and says whether to show progress.
func (o *options) prepare(fs *pflag.FlagSet, stderr io.Writer, inputs []string) (showProgress bool, err error) {
	if err := o.applyPreset(fs); err != nil {
		return false, usageError(err)
	}
	if errs := o.cfg.Validate(); len(errs) > 0 {
		return false, usageError(fmt.Errorf("invalid options: %w", errors.Join(errs...)))
	}
	if o.cfg.WindowMinDuration > 0 && o.timeCol == "" {
		why := "--window-min-duration"
		if o.preset == "service" && !fs.Changed("window-min-duration") {
			why = "--preset service judges windows of at least 1 s (its window_min_duration)"
		}
		return false, usageError(fmt.Errorf("%s needs timestamps: give the --time column (and --time-unit), or --window-min-duration 0s for windows of a count only", why))
	}
	switch o.timeUnit {
	case "ns", "us", "ms", "s":
	default:
		return false, usageError(fmt.Errorf("--time-unit must be one of ns, us, ms, s; got %q", o.timeUnit))
	}
	if o.maxGroups < 1 {
		return false, usageError(fmt.Errorf("--max-groups must be at least 1; got %d", o.maxGroups))
	}
	switch o.progress {
	case "auto":
		showProgress = isTerminal(stderr)
	case "always":
		showProgress = true
	case "never":
	default:
		return false, usageError(fmt.Errorf("--progress must be one of auto, always, never; got %q", o.progress))
	}
	if o.tagsPath != "" {
		// the --tags file replaces (or, not a regular file, is written
		// over) what the path held: never one of the inputs
		if ti, err := os.Stat(o.tagsPath); err == nil {
			for _, in := range inputs {
				if fi, err := os.Stat(in); err == nil && os.SameFile(ti, fi) {
					return false, usageError(fmt.Errorf("--tags %s is the input file %s; give another file name", o.tagsPath, in))
				}
			}
		}
		tw, err := newTagWriter(o.tagsPath)
		if err != nil {
			return false, usageError(fmt.Errorf("--tags: %w", err))
		}
		o.tags = tw
	}
	return showProgress, nil
}

// run detects over the files: a file's refinements run while the next file
// is read; its lines and errors are written in file order. Files with
// errors make the exit status 1, after every file.
func (o *options) run(args []string, stdout, stderr io.Writer, show bool) error {
	failed := 0
	enc := json.NewEncoder(stdout)
	pr := newProgress(stderr, show, len(args))
	o.sem = make(chan struct{}, runtime.GOMAXPROCS(0))
	var pending func()
	for _, f := range args {
		finish, err := o.startFile(f)
		if pending != nil {
			pending()
		}
		pending = func() {
			pr.clear() // before the file's warnings and errors
			if err == nil {
				err = finish(enc)
			}
			if err != nil {
				fmt.Fprintf(stderr, "detect: %s: %v\n", f, err)
				failed++
			}
			pr.fileDone()
		}
	}
	if pending != nil {
		pending()
	}
	pr.finish()
	var tagsErr error
	if o.tags != nil {
		if err := o.tags.close(failed == 0); err != nil {
			tagsErr = fmt.Errorf("--tags %s: %w", o.tagsPath, err)
		} else if failed > 0 && o.tags.path != "" {
			tagsErr = fmt.Errorf("--tags %s not written: every input must be read whole", o.tagsPath)
		} else if failed > 0 {
			tagsErr = fmt.Errorf("--tags %s holds what was read before the errors (no regular file: written as it went)", o.tagsPath)
		}
	}
	if failed > 0 {
		// exit status 1 under k6 too (k6 exits 255 for errors without a
		// code); a --tags file that could not be written is said as well
		return errext.WithExitCodeIfNone(
			errors.Join(fmt.Errorf("%d of %d files had errors", failed, len(args)), tagsErr), exitcodes.ExitCode(exitFileErrors))
	}
	if tagsErr != nil {
		return errext.WithExitCodeIfNone(tagsErr, exitcodes.ExitCode(exitFileErrors))
	}
	return nil
}

// Run runs the detect command with args (without the command name) and
// returns the process exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	cmd := NewCommand(stdout, stderr)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(stderr, "detect: %v\n", err)
		return exitCode(err)
	}
	return 0
}

// applyPreset replaces every detector option the user did not set with the
// preset's value.
func (o *options) applyPreset(fs *pflag.FlagSet) error {
	mk, ok := detector.Presets[o.preset]
	if !ok {
		return fmt.Errorf("--preset must be one of benchmark, service; got %q", o.preset)
	}
	preset := mk()
	cur, base := reflect.ValueOf(&o.cfg).Elem(), reflect.ValueOf(&preset).Elem()
	for i := range cur.NumField() {
		tag := strings.Split(cur.Type().Field(i).Tag.Get("json"), ",")[0]
		if tag == "" || tag == "-" || fs.Changed(strings.ReplaceAll(tag, "_", "-")) {
			continue
		}
		cur.Field(i).Set(base.Field(i))
	}
	return nil
}

// addConfigFlags registers one flag per Config option: the json name in
// kebab-case, defaulting to the DefaultConfig value.
func addConfigFlags(fs *pflag.FlagSet, cfg *detector.Config) {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		name := strings.ReplaceAll(tag, "_", "-")
		usage := "detector option " + tag
		p := v.Field(i).Addr().Interface()
		switch p := p.(type) {
		case *string:
			fs.StringVar(p, name, *p, usage)
		case *int:
			fs.IntVar(p, name, *p, usage)
		case *bool:
			fs.BoolVar(p, name, *p, usage)
		case *float64:
			fs.Float64Var(p, name, *p, usage)
		case *detector.Duration:
			fs.DurationVar((*time.Duration)(p), name, time.Duration(*p), usage)
		default:
			panic("detectcli: no flag type for config field " + f.Name)
		}
	}
}

// result is one output line.
type result struct {
	File        string           `json:"file"`
	Group       *string          `json:"group"`
	N           int64            `json:"n"`
	ColdEnd     *int64           `json:"cold_end"`
	SteadyStart *int64           `json:"steady_start"`
	DeclaredAt  *int64           `json:"declared_at"`
	Regime      string           `json:"regime"`
	Class       string           `json:"class"`
	Relapses    int              `json:"relapses"`
	Windows     int              `json:"windows"`
	Counts      map[string]int64 `json:"counts"`
	OutOfRange  int64            `json:"out_of_range"`
	Hindsight   *hindsight       `json:"hindsight"`
	Params      detector.Config  `json:"params"`
}

type hindsight struct {
	SteadyStart *int64 `json:"steady_start"`
	Class       string `json:"class"`
}

func idx(p *detector.Point) *int64 {
	if p == nil {
		return nil
	}
	i := p.Index
	return &i
}

type series struct {
	name string
	n    int64
	det  *detector.Detector
}

// startFile reads path and runs its series through the online detector,
// then starts their end-of-run refinements (at most one per CPU across
// files, through o.sem) and returns at once; finish waits for them and
// writes the file's lines. The caller reads the next file meanwhile, so the
// CPUs stay busy across files. A bad file yields an error and no lines.
func (o *options) startFile(path string) (finish func(enc *json.Encoder) error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); strings.HasSuffix(path, ".gz") || (len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		r = gz
	}
	fr, err := o.newFileReader(path, r)
	if err != nil {
		return nil, err
	}
	if err := fr.readAll(); err != nil {
		return nil, err
	}
	if len(fr.order) == 0 {
		return nil, errors.New("empty series: no data rows")
	}
	return o.refine(path, fr.order, fr.grp >= 0, &fr.over), nil
}

// fileReader reads one CSV file into a detector per series (group).
type fileReader struct {
	o              *options
	path           string
	cr             *csv.Reader
	header         []string
	col, grp, tcol int     // the value, group and time columns (-1: none)
	unit           float64 // ns per unit of the time column
	order          []*series
	byName         map[string]*series
	cur            *series // the series of the previous row
	over           overflow
}

// newFileReader reads the header of r and finds the columns the options
// name (the value: the last column by default).
func (o *options) newFileReader(path string, r io.Reader) (*fileReader, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	cr.Comment = '#' // e.g. the first line of a results folder's series/*.csv
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty file (no header)")
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	header = slices.Clone(header) // the reader reuses its record slice
	fr := &fileReader{o: o, path: path, cr: cr, header: header, col: len(header) - 1, grp: -1, tcol: -1,
		unit: map[string]float64{"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[o.timeUnit], byName: map[string]*series{}}
	find := func(name string) int {
		for i, h := range header {
			if strings.TrimSpace(h) == name {
				return i
			}
		}
		return -1
	}
	if o.column != "" {
		if fr.col = find(o.column); fr.col < 0 {
			return nil, fmt.Errorf("no column %q (columns: %s)", o.column, quoteAll(header))
		}
	}
	if o.group != "" {
		if fr.grp = find(o.group); fr.grp < 0 {
			return nil, fmt.Errorf("no group column %q (columns: %s)", o.group, quoteAll(header))
		}
	}
	if o.timeCol != "" {
		if fr.tcol = find(o.timeCol); fr.tcol < 0 {
			return nil, fmt.Errorf("no time column %q (columns: %s)", o.timeCol, quoteAll(header))
		}
	}
	return fr, nil
}

// readAll reads the rows to the end of the file, each into its series'
// detector; the first bad row is the error.
func (fr *fileReader) readAll() error {
	for {
		rec, err := fr.cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err // a *csv.ParseError names the line and column
		}
		line, _ := fr.cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // blank line
		}
		if err := fr.row(rec, line); err != nil {
			return err
		}
	}
}

// row checks one row and observes its value in its series' detector.
func (fr *fileReader) row(rec []string, line int) error {
	col, grp, tcol, header := fr.col, fr.grp, fr.tcol, fr.header
	need := max(col, grp, tcol)
	if len(rec) <= need {
		return fmt.Errorf("line %d: %d fields, need at least %d", line, len(rec), need+1)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(rec[col]), 64)
	if err != nil {
		return fmt.Errorf("line %d: column %q: not a number: %q", line, header[col], rec[col])
	}
	if err := observation.Check(v); err != nil {
		return fmt.Errorf("line %d: column %q: %q: %w", line, header[col], rec[col], err)
	}
	tns := -1.0
	if tcol >= 0 {
		tv, err := strconv.ParseFloat(strings.TrimSpace(rec[tcol]), 64)
		if err != nil {
			return fmt.Errorf("line %d: time column %q: not a number: %q", line, header[tcol], rec[tcol])
		}
		tns = tv * fr.unit
		if err := observation.CheckTime(tns); err != nil {
			return fmt.Errorf("line %d: time column %q: %q (--time-unit %s): %w", line, header[tcol], rec[tcol], fr.o.timeUnit, err)
		}
	}
	key := ""
	if grp >= 0 {
		key = rec[grp]
	}
	cur, err := fr.series(key)
	if err != nil || cur == nil {
		return err // nil, nil: a group past --max-groups, counted apart
	}
	t := cur.n // observation index as time when there is no time column
	if tcol >= 0 {
		t = int64(tns)
	}
	r := cur.det.Observe(t, v)
	if fr.o.tags != nil {
		fr.o.tags.write(fr.path, key, grp >= 0, cur.n, t, rec[col], r)
	}
	cur.n++
	return nil
}

// series returns the series of group key, a new one (with its detector)
// when the file has not had it; nil when there are already --max-groups
// series (the row is counted in fr.over).
func (fr *fileReader) series(key string) (*series, error) {
	if fr.cur != nil && fr.cur.name == key {
		return fr.cur, nil
	}
	cur := fr.byName[key]
	if cur == nil && len(fr.order) >= fr.o.maxGroups {
		fr.over.add(key)
		return nil, nil
	}
	if cur == nil {
		d, err := detector.New(fr.o.cfg)
		if err != nil {
			return nil, err
		}
		cur = &series{name: strings.Clone(key), det: d}
		fr.byName[cur.name] = cur
		fr.order = append(fr.order, cur)
	}
	fr.cur = cur
	return cur, nil
}

// refine starts the series' end-of-run refinements (the hindsight costs a
// fraction of a second per series: one per CPU across files, through
// o.sem) and returns the function that waits for them and writes the
// file's lines in order.
func (o *options) refine(path string, order []*series, grouped bool, over *overflow) func(enc *json.Encoder) error {
	hind := make([]detector.Snapshot, len(order))
	hindErr := make([]error, len(order))
	var wg sync.WaitGroup
	for i, s := range order {
		if s.n == 0 || o.noHindsight {
			continue
		}
		wg.Add(1)
		o.sem <- struct{}{}
		go func() {
			defer func() { <-o.sem; wg.Done() }()
			hind[i], hindErr[i] = s.det.Hindsight()
		}()
	}
	return func(enc *json.Encoder) error {
		wg.Wait()
		return o.writeFile(path, enc, order, hind, hindErr, grouped, over)
	}
}

// writeFile writes the lines of one file's series.
func (o *options) writeFile(path string, enc *json.Encoder, order []*series, hind []detector.Snapshot,
	hindErr []error, grouped bool, over *overflow) error {
	var errs []error
	for i, s := range order {
		snap := s.det.Snapshot()
		if snap.N == 0 {
			errs = append(errs, fmt.Errorf("group %q: empty series", s.name))
			continue
		}
		if hindErr[i] != nil {
			return hindErr[i] // cannot happen: detect never sets DropTrace
		}
		var hs *hindsight
		if !o.noHindsight {
			hs = &hindsight{SteadyStart: idx(hind[i].SteadyStart), Class: hind[i].Class.String()}
		}
		res := result{
			File: path, N: snap.N, ColdEnd: idx(snap.ColdEnd), SteadyStart: idx(snap.SteadyStart),
			DeclaredAt: idx(snap.DeclaredAt), Regime: snap.Regime.String(), Class: snap.Class.String(),
			Relapses: snap.NRelapses, Windows: snap.Windows, OutOfRange: snap.OutOfRange,
			Counts:    map[string]int64{"cold": snap.Counts[0], "warmup": snap.Counts[1], "steady": snap.Counts[2]},
			Hindsight: hs,
			Params:    o.cfg,
		}
		if grouped {
			g := s.name
			res.Group = &g
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	if over.rows() > 0 {
		if err := enc.Encode(otherLine{File: path, Other: over.report(o.maxGroups)}); err != nil {
			return err
		}
		fmt.Fprintf(o.stderr, "detect: %s: WARNING: %s\n", path, over.warning(o.maxGroups))
	}
	return errors.Join(errs...)
}

// tagWriter writes the --tags CSV: one row per observation with the regime
// it was counted in (the regime in force when it arrived).
type tagWriter struct {
	f    *os.File
	w    *bufio.Writer
	buf  []byte
	path string      // where the file goes when complete ("": written in place)
	mode os.FileMode // the mode it gets there
}

// newTagWriter writes into a hidden temporary file beside path (beside
// the file a symbolic link names, which stays a link); close puts it in
// place only when every input was read (nothing is written half: a failed
// input or a full disk leaves path as it was). A path that is no regular
// file (/dev/stdout, a pipe) is written to as it goes: there is nothing
// to put in place.
func newTagWriter(path string) (*tagWriter, error) {
	target := path
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, fmt.Errorf("%s is a folder; give a file name", path)
		}
		if !fi.Mode().IsRegular() {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0) //nolint:gosec // the user's output
			if err != nil {
				return nil, err
			}
			return newTagWriterOn(f, "")
		}
		mode = fi.Mode().Perm() // the file it replaces keeps its mode
		if t, err := filepath.EvalSymlinks(path); err == nil {
			target = t
		}
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		// name the path asked for, not the hidden temporary file
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	tw, err := newTagWriterOn(f, target)
	if err == nil {
		tw.mode = mode
	}
	return tw, err
}

func newTagWriterOn(f *os.File, target string) (*tagWriter, error) {
	tw := &tagWriter{f: f, w: bufio.NewWriterSize(f, 1<<16), path: target}
	if _, err := tw.w.WriteString("file,group,index,time,value,regime\n"); err != nil {
		_ = tw.close(false)
		return nil, err
	}
	return tw, nil
}

func (tw *tagWriter) write(file, group string, grouped bool, index, t int64, value string, r detector.Regime) {
	b := tw.buf[:0]
	b = csvField(b, file)
	b = append(b, ',')
	if grouped {
		b = csvField(b, group)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, index, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, t, 10)
	b = append(b, ',')
	b = csvField(b, strings.TrimSpace(value))
	b = append(b, ',')
	b = append(b, r.String()...)
	b = append(b, '\n')
	tw.buf = b
	_, _ = tw.w.Write(b) // the error surfaces at close (bufio keeps it)
}

// csvField appends s, quoted when it holds a comma, quote or line break.
func csvField(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

// close finishes the file: with keep, renamed onto its path when every
// byte reached the disk; without (an input failed), or on any error,
// removed, and the path keeps what it held. A file written in place is
// only closed.
func (tw *tagWriter) close(keep bool) error {
	err := tw.w.Flush()
	if tw.path == "" {
		if cerr := tw.f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err == nil && keep {
		err = tw.f.Sync()
	}
	if cerr := tw.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && keep {
		if err = os.Chmod(tw.f.Name(), tw.mode); err == nil {
			err = os.Rename(tw.f.Name(), tw.path)
		}
	}
	if err != nil || !keep {
		_ = os.Remove(tw.f.Name())
	}
	return err
}
