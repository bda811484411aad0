package detectcli

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal (progress is shown on one by
// default).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}

// progress rewrites one status line on stderr after each file: a long
// detect (the JMH corpus is 114 files) says how far it is and how long the
// rest should take. Off, it writes nothing.
type progress struct {
	w          io.Writer
	on         bool
	total      int
	done       int
	start      time.Time
	lineLength int
}

func newProgress(w io.Writer, on bool, total int) *progress {
	return &progress{w: w, on: on, total: total, start: time.Now()}
}

func (p *progress) fileDone() {
	p.done++
	if !p.on {
		return
	}
	el := time.Since(p.start)
	line := fmt.Sprintf("detect: %d/%d files, %s elapsed", p.done, p.total, el.Round(100*time.Millisecond))
	if p.done < p.total {
		left := time.Duration(float64(el) / float64(p.done) * float64(p.total-p.done))
		line += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	p.write(line)
}

// write replaces the status line with line.
func (p *progress) write(line string) {
	pad := max(p.lineLength-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%*s", line, pad, "")
	p.lineLength = len(line)
}

// clear blanks the status line before another message is written.
func (p *progress) clear() {
	if p.on && p.lineLength > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.lineLength, "")
		p.lineLength = 0
	}
}

// finish ends the status line.
func (p *progress) finish() {
	if p.on && p.lineLength > 0 {
		fmt.Fprintln(p.w)
		p.lineLength = 0
	}
}
